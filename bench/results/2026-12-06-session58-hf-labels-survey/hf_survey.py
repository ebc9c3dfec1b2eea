import sys, copy, traceback, torch
sys.path.insert(0, "/work/main/python"); sys.path.insert(0, "/work/main/tests/python")
import tightfit, transformers
from torch_training import adamw_losses
transformers.logging.set_verbosity_error()
torch.set_num_threads(1)
B, T, V = 4, 12, 96

class Own(torch.nn.Module):
    def __init__(s, m, names): super().__init__(); s.m, s.names = m, names
    def forward(s, *args): return s.m(**dict(zip(s.names, args))).loss

def run(label, model, inputs):
    torch.manual_seed(0)
    w = Own(model.train(), list(inputs))
    start = copy.deepcopy(w)
    try:
        g = tightfit.from_torch(w, tuple(inputs.values()), loss="output", input_names=list(inputs))
        plan = tightfit.compile(g, set={"N": B}, optimizer="adamw", lr=1e-3, weight_decay=0, clip=0)
        s = tightfit.Session(plan, seed=0)
        feed = {k: v.numpy() for k, v in inputs.items()}
        got = [s.step(feed) for _ in range(3)]
        want = adamw_losses(start, tuple(inputs.values()), None, 3, 1e-3, criterion=lambda l, _: l)
        worst = max(abs(a - b) / abs(b) for a, b in zip(got, want))
        print(f"{'OK ' if worst < 1e-4 else 'DIFF'} {label}: {got[0]:.6f}->{got[-1]:.6f} vs {want[0]:.6f}->{want[-1]:.6f} worst {worst:.1e}", flush=True)
    except Exception as e:
        print(f"FAIL {label}: {type(e).__name__}: {str(e)[:300]}", flush=True)

ids = torch.randint(3, V, (B, T)); mask = torch.ones(B, T, dtype=torch.long)
lm_labels = ids.clone(); lm_labels[:, 8:] = -100
small = dict(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64, vocab_size=V,
             max_position_embeddings=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
which = sys.argv[1:] 
def want(n): return not which or n in which
if want("bert_cls"):
    run("BertForSequenceClassification CE", transformers.BertForSequenceClassification(transformers.BertConfig(num_labels=3, **small)),
        {"input_ids": ids, "labels": torch.randint(0, 3, (B,))})
if want("bert_reg"):
    run("BertForSequenceClassification regression", transformers.BertForSequenceClassification(transformers.BertConfig(num_labels=1, **small)),
        {"input_ids": ids, "labels": torch.randn(B)})
if want("bert_multi"):
    run("BertForSequenceClassification multi-label", transformers.BertForSequenceClassification(transformers.BertConfig(num_labels=3, problem_type="multi_label_classification", **small)),
        {"input_ids": ids, "labels": (torch.rand(B, 3) > 0.5).float()})
if want("bert_mlm"):
    run("BertForMaskedLM", transformers.BertForMaskedLM(transformers.BertConfig(**small)), {"input_ids": ids, "labels": lm_labels})
if want("bert_tok"):
    run("BertForTokenClassification", transformers.BertForTokenClassification(transformers.BertConfig(num_labels=5, **small)),
        {"input_ids": ids, "labels": torch.where(lm_labels < 0, lm_labels, lm_labels % 5)})
if want("bert_qa"):
    run("BertForQuestionAnswering", transformers.BertForQuestionAnswering(transformers.BertConfig(**small)),
        {"input_ids": ids, "start_positions": torch.randint(0, T, (B,)), "end_positions": torch.randint(0, T, (B,))})
if want("gpt2"):
    run("GPT2LMHeadModel", transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=V, n_positions=32, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0)),
        {"input_ids": ids, "labels": lm_labels})
if want("gpt2_cls"):
    run("GPT2ForSequenceClassification", transformers.GPT2ForSequenceClassification(transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=V, n_positions=32, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0, num_labels=3, pad_token_id=0)),
        {"input_ids": ids, "labels": torch.randint(0, 3, (B,))})
if want("llama"):
    run("LlamaForCausalLM", transformers.LlamaForCausalLM(transformers.LlamaConfig(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, hidden_size=32, intermediate_size=64, vocab_size=V, max_position_embeddings=32, attn_implementation="eager")),
        {"input_ids": ids, "labels": lm_labels})
if want("t5"):
    run("T5ForConditionalGeneration", transformers.T5ForConditionalGeneration(transformers.T5Config(num_layers=1, num_decoder_layers=1, num_heads=2, d_model=32, d_kv=16, d_ff=64, vocab_size=V, dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0)),
        {"input_ids": ids, "labels": lm_labels})
if want("bart"):
    run("BartForConditionalGeneration", transformers.BartForConditionalGeneration(transformers.BartConfig(encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2, d_model=32, encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=V, max_position_embeddings=32, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)),
        {"input_ids": ids, "labels": lm_labels})
if want("vit"):
    run("ViTForImageClassification", transformers.ViTForImageClassification(transformers.ViTConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64, image_size=16, patch_size=4, num_labels=5, hidden_dropout_prob=0, attention_probs_dropout_prob=0)),
        {"pixel_values": torch.randn(B, 3, 16, 16), "labels": torch.randint(0, 5, (B,))})
if want("distil"):
    run("DistilBertForSequenceClassification", transformers.DistilBertForSequenceClassification(transformers.DistilBertConfig(n_layers=2, n_heads=2, dim=32, hidden_dim=64, vocab_size=V, max_position_embeddings=32, dropout=0.0, attention_dropout=0.0, seq_classif_dropout=0.0, num_labels=3)),
        {"input_ids": ids, "labels": torch.randint(0, 3, (B,))})
if want("roberta_mc"):
    run("RobertaForMultipleChoice", transformers.RobertaForMultipleChoice(transformers.RobertaConfig(**small)),
        {"input_ids": ids.reshape(B, 2, T // 2), "labels": torch.randint(0, 2, (B,))})
if want("whisper"):
    run("WhisperForConditionalGeneration", transformers.WhisperForConditionalGeneration(transformers.WhisperConfig(encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2, d_model=32, encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=V, num_mel_bins=8, max_source_positions=8, max_target_positions=32, dropout=0.0, decoder_start_token_id=1, pad_token_id=0)),
        {"input_features": torch.randn(B, 8, 16), "labels": lm_labels})
