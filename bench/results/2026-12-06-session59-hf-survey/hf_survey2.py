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
        print(f"FAIL {label}: {type(e).__name__}: {str(e)[:400]}", flush=True)

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
if want("mixtral"): lm("mixtral", T_.MixtralConfig(num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, attn_implementation="eager", **D), T_.MixtralForCausalLM)
if want("qwen2"): lm("qwen2", T_.Qwen2Config(num_key_value_heads=2, attn_implementation="eager", **D), T_.Qwen2ForCausalLM)
if want("qwen2moe"): lm("qwen2moe", T_.Qwen2MoeConfig(num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=32, attn_implementation="eager", **D), T_.Qwen2MoeForCausalLM)
if want("gemma"): lm("gemma", T_.GemmaConfig(num_key_value_heads=2, head_dim=8, attn_implementation="eager", **D), T_.GemmaForCausalLM)
if want("gemma2"): lm("gemma2", T_.Gemma2Config(num_key_value_heads=2, head_dim=8, attn_implementation="eager", sliding_window=4, **D), T_.Gemma2ForCausalLM)
if want("olmoe"): lm("olmoe", T_.OlmoeConfig(num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, attn_implementation="eager", **D), T_.OlmoeForCausalLM)
if want("phi3"): lm("phi3", T_.Phi3Config(num_key_value_heads=2, attn_implementation="eager", pad_token_id=0, **D), T_.Phi3ForCausalLM)
if want("cohere"): lm("cohere", T_.CohereConfig(num_key_value_heads=2, attn_implementation="eager", **D), T_.CohereForCausalLM)
if want("granite"): lm("granite", T_.GraniteConfig(num_key_value_heads=2, attn_implementation="eager", **D), T_.GraniteForCausalLM)
if want("mamba"): lm("mamba", T_.MambaConfig(num_hidden_layers=2, hidden_size=32, state_size=4, vocab_size=V, expand=2, conv_kernel=4), T_.MambaForCausalLM)
if want("mamba2"): lm("mamba2", T_.Mamba2Config(num_hidden_layers=2, hidden_size=32, state_size=4, vocab_size=V, expand=2, conv_kernel=4, num_heads=4, head_dim=16, n_groups=1, chunk_size=4), T_.Mamba2ForCausalLM)
if want("rwkv"): lm("rwkv", T_.RwkvConfig(num_hidden_layers=2, hidden_size=32, attention_hidden_size=32, intermediate_size=64, vocab_size=V, context_length=16), T_.RwkvForCausalLM)
if want("recurrent_gemma"): lm("recurrent_gemma", T_.RecurrentGemmaConfig(num_hidden_layers=3, hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2, vocab_size=V, lru_width=32, attention_window_size=8, block_types=["recurrent","recurrent","attention"]), T_.RecurrentGemmaForCausalLM)
if want("jamba"): lm("jamba", T_.JambaConfig(attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2, expert_layer_offset=1, num_experts=2, num_experts_per_tok=1, num_key_value_heads=2, mamba_d_state=4, mamba_expand=2, use_mamba_kernels=False, **D), T_.JambaForCausalLM)
if want("switch"):
    if True:
        c = T_.SwitchTransformersConfig(num_layers=2, num_decoder_layers=2, num_heads=2, d_model=32, d_kv=16, d_ff=64, expert_capacity=8, num_experts=4, vocab_size=V, decoder_start_token_id=0, pad_token_id=0, dropout_rate=0.0, router_jitter_noise=0.0, encoder_sparse_step=1, decoder_sparse_step=1)
        run("switch", T_.SwitchTransformersForConditionalGeneration(c), {"input_ids": ids, "labels": lab})
if want("reformer"): lm("reformer", T_.ReformerConfig(attn_layers=["local","local"], hidden_size=32, feed_forward_size=64, num_attention_heads=2, attention_head_size=16, vocab_size=V, axial_pos_embds=False, max_position_embeddings=32, local_attn_chunk_length=4, is_decoder=True, hidden_dropout_prob=0, local_attention_probs_dropout_prob=0), T_.ReformerModelWithLMHead)
if want("fnet"): lm("fnet", T_.FNetConfig(num_hidden_layers=2, hidden_size=32, intermediate_size=64, vocab_size=V, max_position_embeddings=32, hidden_dropout_prob=0, use_tpu_fourier_optimizations=False), T_.FNetForMaskedLM)
if want("longformer"): lm("longformer", T_.LongformerConfig(attention_window=4, hidden_dropout_prob=0, attention_probs_dropout_prob=0, pad_token_id=1, **D), T_.LongformerForMaskedLM)
if want("bigbird"): lm("bigbird", T_.BigBirdConfig(attention_type="original_full", hidden_dropout_prob=0, attention_probs_dropout_prob=0, **D), T_.BigBirdForMaskedLM)
if want("nystrom"): lm("nystrom", T_.NystromformerConfig(num_landmarks=4, segment_means_seq_len=T, hidden_dropout_prob=0, attention_probs_dropout_prob=0, **D), T_.NystromformerForMaskedLM)
if want("esm"): lm("esm", T_.EsmConfig(pad_token_id=1, mask_token_id=2, hidden_dropout_prob=0, attention_probs_dropout_prob=0, position_embedding_type="rotary", **D), T_.EsmForMaskedLM)
if want("canine"):
    pass
if want("xglm"): lm("xglm", T_.XGLMConfig(num_layers=2, attention_heads=4, d_model=32, ffn_dim=64, vocab_size=V, max_position_embeddings=32, dropout=0, attention_dropout=0, activation_dropout=0), T_.XGLMForCausalLM)
if want("mpt"): lm("mpt", T_.MptConfig(n_layers=2, n_heads=4, d_model=32, vocab_size=V, max_seq_len=32), T_.MptForCausalLM)
if want("persimmon"): lm("persimmon", T_.PersimmonConfig(**D), T_.PersimmonForCausalLM)
if want("nemotron"): lm("nemotron", T_.NemotronConfig(num_key_value_heads=2, attn_implementation="eager", **D), T_.NemotronForCausalLM)
if want("dbrx"): lm("dbrx", T_.DbrxConfig(d_model=32, n_heads=4, n_layers=2, max_seq_len=32, vocab_size=V, attn_config={"kv_n_heads":2}, ffn_config={"ffn_hidden_size":32, "moe_num_experts":4, "moe_top_k":2}), T_.DbrxForCausalLM)
if want("ctrl"): lm("ctrl", T_.CTRLConfig(n_layer=2, n_head=4, n_embd=32, dff=64, vocab_size=V, n_positions=32, resid_pdrop=0, embd_pdrop=0), T_.CTRLLMHeadModel)
if want("transfoxl"): pass
if want("biogpt"): lm("biogpt", T_.BioGptConfig(hidden_dropout_prob=0, attention_probs_dropout_prob=0, **D), T_.BioGptForCausalLM)
if want("megatron"): lm("megatron", T_.MegatronBertConfig(hidden_dropout_prob=0, attention_probs_dropout_prob=0, **D), T_.MegatronBertForMaskedLM)
if want("rembert"): lm("rembert", T_.RemBertConfig(input_embedding_size=16, output_embedding_size=16, hidden_dropout_prob=0, attention_probs_dropout_prob=0, **D), T_.RemBertForMaskedLM)
if want("roformer"): lm("roformer", T_.RoFormerConfig(hidden_dropout_prob=0, attention_probs_dropout_prob=0, **D), T_.RoFormerForMaskedLM)
if want("ibert"): lm("ibert", T_.IBertConfig(hidden_dropout_prob=0, attention_probs_dropout_prob=0, **D), T_.IBertForMaskedLM)
if want("mra"): lm("mra", T_.MraConfig(hidden_dropout_prob=0, attention_probs_dropout_prob=0, **D), T_.MraForMaskedLM)
if want("yoso"): lm("yoso", T_.YosoConfig(hidden_dropout_prob=0, attention_probs_dropout_prob=0, use_expectation=True, **D), T_.YosoForMaskedLM)
