import subprocess, json, statistics, sys, os
D='/work/main/models/data'
rows=[('mlp-32','mlp32',D+'/digits/train',60,5),('cnn-256','cnn256',D+'/digits/train',20,5),
      ('gpt-8','gpt8',D+'/text/train',20,5),('gpt-32','gpt32',D+'/text/train',10,5),
      ('asr-4','asr4','asr4',12,5),('asr-16','asr16','asr16',6,4),('gpt2-l2-2','g2l2',D+'/text/train',5,3)]
only=sys.argv[1].split(',') if len(sys.argv)>1 else None
for name,plan,data,steps,rounds in rows:
    if only and name not in only: continue
    for t in (1,2):
        res={'base':[],'z':[]}
        for r in range(rounds):
            for v in ('base','z'):
                env=dict(os.environ,OMP_NUM_THREADS=str(t),OPENBLAS_NUM_THREADS='1')
                out=subprocess.run(['./timer-'+v,f'{plan}-t{t}.tfplan',data,str(steps+2),str(t)],capture_output=True,text=True,env=env).stdout
                s=[json.loads(l)['seconds'] for l in out.splitlines() if '"seconds"' in l][2:]
                res[v].append(statistics.median(s)*1e3)
        b=statistics.median(res['base']); z=statistics.median(res['z'])
        print(f"{name:10s} T={t} base {b:8.3f} ms  new {z:8.3f} ms  new/base {z/b:.3f}   runs base {[round(x,2) for x in res['base']]} new {[round(x,2) for x in res['z']]}", flush=True)
