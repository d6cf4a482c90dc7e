"""Run by the SGLang environment's own Python (env.py): the tiny model the real server serves.

No download: a 2-layer GPT-2 (hidden 64, 2 heads, 512 positions, vocabulary 1000) with random
weights from a fixed seed, and a byte-level BPE tokenizer trained here on a few sentences, with
bos/eos/pad/unk and a chat template, both written with save_pretrained. Logits have 1000 columns,
so SGLang's DisallowedTokensLogitsProcessor given token 5000 indexes past them: the
request-triggered crash. Its serialised form (SGLang's ``to_str()``) goes to
``logit_processor.json`` beside the model, for the tests to put in a request.

    <env>/bin/python make_model.py <env>     # writes <env>/model and <env>/logit_processor.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

SENTENCES = (
    "The quick brown fox jumps over the lazy dog.",
    "Hello world, this is a tiny model made for tests.",
    "SGLang serves large language models on many GPUs.",
    "A crash dump holds the requests that were in flight.",
    "What is the capital of France? Paris is the capital of France.",
    "Count with me: one two three four five six seven eight nine ten.",
)
VOCABULARY = 1000
SEED = 0


def tokenizer() -> PreTrainedTokenizerFast:
    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCABULARY, special_tokens=["<unk>", "<s>", "</s>", "<pad>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(list(SENTENCES) * 10, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>",
                                   pad_token="<pad>", unk_token="<unk>")
    fast.chat_template = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                          "{% if add_generation_prompt %}assistant:{% endif %}")
    return fast


def main(folder: Path) -> None:
    model_dir = folder / "model"
    fast = tokenizer()
    fast.save_pretrained(model_dir)
    torch.manual_seed(SEED)
    config = GPT2Config(vocab_size=VOCABULARY, n_positions=512, n_embd=64, n_layer=2, n_head=2,
                        bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
                        pad_token_id=fast.pad_token_id)
    GPT2LMHeadModel(config).save_pretrained(model_dir)

    from sglang.srt.sampling.custom_logit_processor import DisallowedTokensLogitsProcessor

    (folder / "logit_processor.json").write_text(
        json.dumps({"disallowed_tokens": DisallowedTokensLogitsProcessor.to_str()}) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
