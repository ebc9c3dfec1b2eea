"""Emulates CUDA's tensor-core attention (P and dS rounded to bf16/f16 once, f32 sums) on data like
   the conformance suite's attention rows (q, k, v, dy ~ N(0, 1)) and prints, per output, the worst
   |emulated - f64| / (u max(1, max |ref|)), max |ref|, and the worst ratio to the suite's old
   elementwise tolerance. Run: /usr/bin/python3 attention_rounding.py (numpy). The sixth lend's
   cuda_ops failures (67, all attention rows with heads of 64 and 128) match its ratios."""
import numpy as np
def bf(x):  # round f32 -> bf16 (nearest even), as float32
    x = np.asarray(x, np.float32).copy(); b = x.view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32)
def f16(x): return np.asarray(x,np.float32).astype(np.float16).astype(np.float32)
def run(N,Tq,Tk,H,D,causal,rnd,u,seed):
    r=np.random.default_rng(seed)
    q=rnd(r.standard_normal((N,Tq,H*D))); k=rnd(r.standard_normal((N,Tk,H*D))); v=rnd(r.standard_normal((N,Tk,H*D)))
    dy=rnd(r.standard_normal((N,Tq,H*D)))
    sc=1/np.sqrt(D); worst={}
    for n in range(N):
      for h in range(H):
        s=slice(h*D,(h+1)*D)
        Q,K,V,DY=q[n,:,s],k[n,:,s],v[n,:,s],dy[n,:,s]
        mask=np.zeros((Tq,Tk),bool)
        if causal:
            off=Tk-Tq  # bottom-right? assume top-left alignment: query i sees keys <= i
            for i in range(Tq): mask[i,i+1:]=True
        # f64 reference
        S=(Q.astype(np.float64)@K.T.astype(np.float64))*sc; S[mask]=-np.inf
        P=np.exp(S-S.max(1,keepdims=True)); P/=P.sum(1,keepdims=True)
        O=P@V.astype(np.float64)
        dP=DY.astype(np.float64)@V.T.astype(np.float64); delta=(dP*P).sum(1,keepdims=True)
        dS=P*(dP-delta); dQ=dS@K.astype(np.float64)*sc; dK=dS.T@Q.astype(np.float64)*sc; dV=P.T@DY.astype(np.float64)
        # emulated fast path (f32, P and dS rounded)
        S32=((Q@K.T)*np.float32(sc)).astype(np.float32); S32[mask]=-np.inf
        m=S32.max(1,keepdims=True); p=np.exp(S32-m).astype(np.float32); l=p.sum(1,keepdims=True,dtype=np.float32)
        o=rnd(((rnd(p)@V)/l).astype(np.float32))
        lse=m+np.log(l); p2=np.exp(S32-lse).astype(np.float32)
        dv=rnd(rnd(p2).T@DY)
        dp=(DY@V.T).astype(np.float32); dl=(DY*o).sum(1,keepdims=True,dtype=np.float32)
        ds=rnd(p2*(dp-dl)); dq=rnd(ds@K*np.float32(sc)); dk=rnd(ds.T@Q*np.float32(sc))
        for name,a,b in (('o',o,O),('dq',dq,dQ),('dk',dk,dK),('dv',dv,dV)):
            err=np.abs(a-b).max(); mx=np.abs(b).max()
            rel=np.max(np.abs(a-b)/(1.01*u*np.abs(b)+1e-5*max(1,mx)))
            w=worst.setdefault(name,[0,0,0]); w[0]=max(w[0],err/(u*max(1,mx))); w[1]=max(w[1],mx); w[2]=max(w[2],rel)
    return worst
for rnd,u,tn in ((bf,2**-8,'bf16'),(f16,2**-11,'f16')):
  for case in ((2,33,17,2,128,False),(2,257,257,1,64,False),(2,257,257,1,64,True),(2,70,70,12,64,True)):
    for seed in range(3):
      w=run(*case,rnd,u,seed)
      print(tn,case,seed,{k:(round(a,3),round(b,2),round(c,1)) for k,(a,b,c) in w.items()})
