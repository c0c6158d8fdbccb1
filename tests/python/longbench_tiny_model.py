"""A tiny random Qwen2 checkpoint and a tiny byte-level BPE tokenizer (Qwen2's pre-tokenizer,
ChatML tokens, Qwen2.5-Instruct's chat template), made with transformers / tokenizers, for
the end-to-end tests of `sparsebalance eval ...`."""

import json
from pathlib import Path

import torch
import transformers
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

# The branch of Qwen2.5-Instruct's Jinja chat template that plain conversations take.
QWEN_CHAT_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' or (message.role == 'system' and not loop.first) or message.role == 'assistant' %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
ENGLISH = ("the model reads a long document and answers a question about it . passages from wikipedia "
           "describe cities rivers and people who lived there in the nineteenth century").split()
CHINESE = "我们在北京讨论长文本模型的评测问题今天天气很好会议总结如下"


def sentence(rng_state, n, words):
    out = []
    for _ in range(n):
        rng_state[0] = (rng_state[0] * 1103515245 + 12345) % (2 ** 31)
        out.append(words[rng_state[0] % len(words)])
    return out


def make_tokenizer(folder, extra_corpus=(), vocab_size=600):
    """The tiny tokenizer; extra_corpus (texts) and a larger vocab_size make longer fixed
    prompts cheaper in tokens (RULER's templates)."""
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    state = [7]
    corpus = [" ".join(sentence(state, 40, ENGLISH)) for _ in range(200)]
    corpus += ["".join(sentence(state, 30, list(CHINESE))) for _ in range(100)]
    corpus += list(extra_corpus)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus, trainer)
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>",
                                                pad_token="<|endoftext|>", clean_up_tokenization_spaces=False)
    fast.chat_template = QWEN_CHAT_TEMPLATE
    fast.save_pretrained(folder)
    # transformers >= 5 writes a TemplateProcessing that adds no ids here; the C++ tokenizer
    # reads it as is (tokenizer_json.h).
    assert json.loads((Path(folder) / "tokenizer.json").read_text(encoding="utf-8"))["post_processor"]["type"] \
        == "TemplateProcessing"
    return transformers.AutoTokenizer.from_pretrained(folder)


def make_model(folder, tok, max_position_embeddings=1024, rope_scaling=None):
    torch.manual_seed(0)
    config = transformers.Qwen2Config(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, max_position_embeddings=max_position_embeddings, rope_theta=10000.0,
        rms_norm_eps=1e-6, tie_word_embeddings=True, eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
        bos_token_id=None, pad_token_id=tok.pad_token_id, rope_scaling=rope_scaling)
    model = transformers.Qwen2ForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") or "norm" in name:
                p.add_(torch.randn_like(p) * 0.1)
            else:
                p.mul_(8.0)  # sharper logits: greedy choices far from ties
    model.generation_config.eos_token_id = [config.eos_token_id, tok.convert_tokens_to_ids("<|endoftext|>")]
    model.save_pretrained(folder, safe_serialization=True)
    return model




def make_checkpoint(folder):
    """tokenizer files + a random model saved in `folder`; returns (tokenizer, model)."""
    tok = make_tokenizer(folder)
    return tok, make_model(folder, tok)
