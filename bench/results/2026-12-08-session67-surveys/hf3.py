import sys, copy, traceback, torch
sys.path.insert(0, "/work/main/python"); sys.path.insert(0, "/work/main/tests/python")
import tightfit, transformers
from torch_training import adamw_losses
transformers.logging.set_verbosity_error()
torch.set_num_threads(1)
B, T, V = 2, 8, 64
T_ = transformers
class Own(torch.nn.Module):
    def __init__(s, m, names): super().__init__(); s.m, s.names = m, names
    def forward(s, *args): return s.m(**dict(zip(s.names, args))).loss

def run(label, model, inputs):
    torch.manual_seed(0)
    w = Own(model.train(), list(inputs))
    start = copy.deepcopy(w)
    try:
        g = tightfit.from_torch(w, tuple(inputs.values()), loss="output", input_names=list(inputs))
        plan = tightfit.compile(g, set={"N": B}, optimizer="adamw", lr=1e-3, weight_decay=0, clip=0, **({"target": "vulkan"} if __import__("os").environ.get("DEV", "cpu") != "cpu" else {}))
        s = tightfit.Session(plan, seed=0, device=__import__("os").environ.get("DEV", "cpu"))
        feed = {k: v.numpy() for k, v in inputs.items()}
        got = [s.step(feed) for _ in range(3)]
        want = adamw_losses(start, tuple(inputs.values()), None, 3, 1e-3, criterion=lambda l, _: l)
        worst = max(abs(a - b) / abs(b) for a, b in zip(got, want))
        print(f"{'OK ' if worst < 1e-4 else 'DIFF'} {label}: {got[0]:.6f}->{got[-1]:.6f} vs {want[0]:.6f}->{want[-1]:.6f} worst {worst:.1e}", flush=True)
    except Exception as e:
        print(f"FAIL {label}: {type(e).__name__}: {str(e)[:1500]}", flush=True)

torch.manual_seed(1)
ids = torch.randint(3, V, (B, T)); lab = ids.clone(); lab[:, 6:] = -100
D = dict(num_hidden_layers=2, num_attention_heads=4, hidden_size=32, intermediate_size=64, vocab_size=V, max_position_embeddings=32)
which = sys.argv[1:]
def want(n): return not which or n in which
def lm(name, cfg, cls, **kw):
    if want(name):
        try: m = cls(cfg)
        except Exception as e: print(f"SKIP {name}: {e}"); return
        run(name, m, {"input_ids": ids, "labels": lab, **kw})
Z = dict(dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)
ED = dict(encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, d_model=32, encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=V, max_position_embeddings=32, pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2, **Z)
def seq2seq(name, cfg_cls, cls, **extra):
    if want(name):
        try: m = cls(cfg_cls(**{**ED, **extra}))
        except Exception as e: print(f"SKIP {name}: {type(e).__name__} {str(e)[:200]}"); return
        run(name, m, {"input_ids": ids, "labels": lab})
seq2seq("mbart", T_.MBartConfig, T_.MBartForConditionalGeneration)
seq2seq("blenderbot", T_.BlenderbotConfig, T_.BlenderbotForConditionalGeneration)
seq2seq("blenderbot_small", T_.BlenderbotSmallConfig, T_.BlenderbotSmallForConditionalGeneration)
seq2seq("plbart", T_.PLBartConfig, T_.PLBartForConditionalGeneration)
seq2seq("mvp", T_.MvpConfig, T_.MvpForConditionalGeneration)
seq2seq("led", T_.LEDConfig, T_.LEDForConditionalGeneration, attention_window=4, max_encoder_position_embeddings=32, max_decoder_position_embeddings=32)
seq2seq("bigbird_pegasus", T_.BigBirdPegasusConfig, T_.BigBirdPegasusForConditionalGeneration, attention_type="original_full")
seq2seq("nllb_moe", T_.NllbMoeConfig, T_.NllbMoeForConditionalGeneration, num_experts=4, expert_capacity=8, router_dtype="float32")
if want("fsmt"):
    c = T_.FSMTConfig(langs=["en", "de"], src_vocab_size=V, tgt_vocab_size=V, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=32, pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2, **Z)
    run("fsmt", T_.FSMTForConditionalGeneration(c), {"input_ids": ids, "labels": lab})
T5D = dict(num_layers=2, num_decoder_layers=2, num_heads=4, d_model=32, d_kv=8, d_ff=64, vocab_size=V, dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0)
if want("mt5"): run("mt5", T_.MT5ForConditionalGeneration(T_.MT5Config(**T5D)), {"input_ids": ids, "labels": lab})
if want("umt5"): run("umt5", T_.UMT5ForConditionalGeneration(T_.UMT5Config(**T5D)), {"input_ids": ids, "labels": lab})
if want("longt5"): run("longt5", T_.LongT5ForConditionalGeneration(T_.LongT5Config(local_radius=2, **T5D)), {"input_ids": ids, "labels": lab})
if want("longt5_tglobal"): run("longt5_tglobal", T_.LongT5ForConditionalGeneration(T_.LongT5Config(local_radius=2, encoder_attention_type="transient-global", global_block_size=4, **T5D)), {"input_ids": ids, "labels": lab})
if want("prophetnet"): run("prophetnet", T_.ProphetNetForConditionalGeneration(T_.ProphetNetConfig(num_encoder_layers=2, num_decoder_layers=2, num_encoder_attention_heads=4, num_decoder_attention_heads=4, hidden_size=32, encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=V, max_position_embeddings=32, ngram=2, num_buckets=8, relative_max_distance=16, pad_token_id=1, decoder_start_token_id=0, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)), {"input_ids": ids, "labels": lab})
BD = dict(hidden_dropout_prob=0, attention_probs_dropout_prob=0, **D)
if want("data2vec_text"): lm("data2vec_text", T_.Data2VecTextConfig(pad_token_id=1, **BD), T_.Data2VecTextForMaskedLM)
if want("ernie"): lm("ernie", T_.ErnieConfig(**BD), T_.ErnieForMaskedLM)
if want("nezha"): lm("nezha", T_.NezhaConfig(**BD), T_.NezhaForMaskedLM)
if want("convbert"): lm("convbert", T_.ConvBertConfig(embedding_size=32, **BD), T_.ConvBertForMaskedLM)
if want("roc_bert"): lm("roc_bert", T_.RoCBertConfig(pronunciation_vocab_size=V, shape_vocab_size=V, **BD), T_.RoCBertForMaskedLM)
if want("xlm_roberta"): lm("xlm_roberta", T_.XLMRobertaConfig(pad_token_id=1, **BD), T_.XLMRobertaForMaskedLM)
if want("camembert"): lm("camembert", T_.CamembertConfig(pad_token_id=1, **BD), T_.CamembertForMaskedLM)
if want("layoutlm"): lm("layoutlm", T_.LayoutLMConfig(**BD), T_.LayoutLMForMaskedLM)
if want("bros"):
    pass
if want("markuplm"): pass
if want("openai_gpt"): lm("openai_gpt", T_.OpenAIGPTConfig(n_layer=2, n_head=4, n_embd=32, vocab_size=V, n_positions=32, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0), T_.OpenAIGPTLMHeadModel)
if want("imagegpt"): lm("imagegpt", T_.ImageGPTConfig(n_layer=2, n_head=4, n_embd=32, vocab_size=V + 1, n_positions=32, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0), T_.ImageGPTForCausalImageModeling)
if want("perceiver"): lm("perceiver", T_.PerceiverConfig(num_latents=8, d_latents=32, d_model=32, num_blocks=1, num_self_attends_per_block=2, num_self_attention_heads=4, num_cross_attention_heads=4, vocab_size=V, max_position_embeddings=T, attention_probs_dropout_prob=0), T_.PerceiverForMaskedLM)
if want("canine"):
    c = T_.CanineConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, downsampling_rate=2, num_hash_buckets=16, num_hash_functions=2, local_transformer_stride=4, hidden_dropout_prob=0, attention_probs_dropout_prob=0, num_labels=3)
    run("canine", T_.CanineForSequenceClassification(c), {"input_ids": ids * 7, "labels": torch.tensor([0, 2])})
if want("xlnet"): pass
if want("git"): pass
if want("splinter"): pass
if want("mobilebert"): pass
if want("markuplm"): lm("markuplm", T_.MarkupLMConfig(**BD), T_.MarkupLMForQuestionAnswering)
