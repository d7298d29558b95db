"""The models of benchmarks 13-16 (issue 40): transformers, torchvision and timm
models as a user builds them, random init, nothing downloaded.

Each :class:`Workload` is a model builder, its batches, its loss and the
optimizer, schedule and clipping its library's examples train it with. Sizes:
``small`` is what issue 40 names (GPT-2 small's 12 layers of width 768,
ResNet-50 and ViT-small at 224x224); ``tiny`` is the 2-layer, width-64 family
where per-op cost dominates, and what the CI smoke run uses. Dropout is off
everywhere (the lazy device's random draws are its own, so a step with
dropout would not compare with eager's); batch norm trains.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

VOCAB_TINY = 128
GPT2_SMALL = dict(n_layer=12, n_embd=768, n_head=12, vocab_size=50257, n_positions=1024)
GPT2_TINY = dict(n_layer=2, n_embd=64, n_head=4, vocab_size=VOCAB_TINY, n_positions=256)
_NO_DROPOUT_GPT2 = dict(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
_TINY_WIDTH = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)


@dataclasses.dataclass
class Workload:
    name: str
    build: Callable  # () -> torch.nn.Module, in training mode
    batches: Callable  # (generator, k) -> k batches, each a dict of host tensors
    loss: Callable  # (model, batch) -> scalar loss
    optimizer: Callable  # (model, total_steps) -> (optimizer, schedule step (no arguments), clip norm or None)
    what: str  # one line for the row notes


# --- optimizers as each library's examples set them up -----------------------------------------------


def hf_adamw(model, total):
    """transformers' Trainer: AdamW, linear warm-up then decay, clipping at 1.0."""
    import torch
    import transformers

    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    sched = transformers.get_linear_schedule_with_warmup(opt, num_warmup_steps=2, num_training_steps=total + 10)
    return opt, sched.step, 1.0


def tv_sgd(batch):
    """torchvision's reference script: SGD with momentum, weight decay, cosine
    schedule, its learning rate of 0.1 for 256 images scaled to the batch (the
    linear scaling rule; at 0.1 a batch of 4 diverges within 3 steps, and its
    rounding differences with it)."""

    def make(model, total):
        import torch

        opt = torch.optim.SGD(model.parameters(), lr=0.1 * batch / 256, momentum=0.9, weight_decay=1e-4)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total + 10)
        return opt, sched.step, None

    return make


def timm_adamw(model, total):
    """timm's train.py: its AdamW (no decay on norms and biases), cosine with warm-up stepped per update."""
    import timm.optim
    import timm.scheduler

    opt = timm.optim.create_optimizer_v2(model, "adamw", lr=5e-4, weight_decay=0.05)
    sched = timm.scheduler.CosineLRScheduler(opt, t_initial=total + 10, warmup_t=2, warmup_lr_init=1e-5,
                                             t_in_epochs=False)
    updates = [0]

    def step():
        updates[0] += 1
        sched.step_update(num_updates=updates[0])

    return opt, step, None


# --- losses and batches ----------------------------------------------------------------------------


def hf_loss(model, batch):
    return model(**batch).loss


def image_loss(model, batch):
    import torch.nn.functional as F

    return F.cross_entropy(model(batch["pixel_values"]), batch["labels"])


def causal_batches(batch, seq, vocab):
    def make(g, k):
        import torch

        out = []
        for _ in range(k):
            ids = torch.randint(0, vocab, (batch, seq), generator=g)
            out.append({"input_ids": ids, "labels": ids})
        return out

    return make


def masked_batches(batch, seq, vocab):
    """BERT's masked LM: 15% of positions replaced by [MASK] (id 4), predicted; the rest ignored (-100)."""
    def make(g, k):
        import torch

        out = []
        for _ in range(k):
            ids = torch.randint(5, vocab, (batch, seq), generator=g)
            pick = torch.rand(batch, seq, generator=g) < 0.15
            pick[:, 1] = True
            labels = torch.full_like(ids, -100)
            labels[pick] = ids[pick]
            out.append({"input_ids": ids.masked_fill(pick, 4), "labels": labels})
        return out

    return make


def seq2seq_batches(batch, seq, vocab):
    def make(g, k):
        import torch

        return [{"input_ids": torch.randint(2, vocab, (batch, seq), generator=g),
                 "labels": torch.randint(2, vocab, (batch, seq // 2), generator=g)} for _ in range(k)]

    return make


def image_batches(batch, size, classes):
    def make(g, k):
        import torch

        return [{"pixel_values": torch.randn(batch, 3, size, size, generator=g),
                 "labels": torch.randint(0, classes, (batch,), generator=g)} for _ in range(k)]

    return make


# --- builders --------------------------------------------------------------------------------------


def hf(config_name, model_name, **kw):
    def build():
        import transformers

        return getattr(transformers, model_name)(getattr(transformers, config_name)(**kw)).train()

    return build


def gpt2(size: str, batch: int = 4, seq: int = 128) -> Workload:
    """Benchmark 13: a GPT-2 causal LM (GPT-2 small's shape, or 2 layers of width 64), batch x seq tokens."""
    shape = GPT2_SMALL if size == "small" else GPT2_TINY
    return Workload(f"GPT-2 {size}", hf("GPT2Config", "GPT2LMHeadModel", **shape, **_NO_DROPOUT_GPT2),
                    causal_batches(batch, seq, shape["vocab_size"]), hf_loss, hf_adamw,
                    f"{shape['n_layer']} layers, width {shape['n_embd']}, vocabulary {shape['vocab_size']}, "
                    f"batch {batch}x{seq}; AdamW, linear warm-up, clip 1.0")


def tiny_transformers(batch: int = 4, seq: int = 32) -> list[Workload]:
    """Benchmark 14: the transformers family at 2 layers of width 64, where per-op cost dominates
    (issue 40's table: GPT-2, BERT, Llama, Mistral, T5). Mistral's sliding window is half the
    sequence, so its attention mask is not Llama's causal one."""
    v = VOCAB_TINY
    hf_opt = "AdamW, linear warm-up, clip 1.0"
    tokens = f"batch {batch}x{seq}, vocabulary {v}; {hf_opt}"
    return [
        Workload("GPT-2 tiny", hf("GPT2Config", "GPT2LMHeadModel", **GPT2_TINY, **_NO_DROPOUT_GPT2),
                 causal_batches(batch, seq, v), hf_loss, hf_adamw, f"causal LM, {tokens}"),
        Workload("BERT masked LM tiny",
                 hf("BertConfig", "BertForMaskedLM", vocab_size=v, max_position_embeddings=256, **_TINY_WIDTH,
                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
                 masked_batches(batch, seq, v), hf_loss, hf_adamw, f"15% masked, {tokens}"),
        Workload("Llama tiny",
                 hf("LlamaConfig", "LlamaForCausalLM", vocab_size=v, max_position_embeddings=256, **_TINY_WIDTH,
                    num_key_value_heads=2, bos_token_id=0, eos_token_id=0, pad_token_id=0),
                 causal_batches(batch, seq, v), hf_loss, hf_adamw, f"causal LM, 2 key-value heads, {tokens}"),
        Workload("Mistral tiny",
                 hf("MistralConfig", "MistralForCausalLM", vocab_size=v, max_position_embeddings=256, **_TINY_WIDTH,
                    num_key_value_heads=2, sliding_window=seq // 2, bos_token_id=0, eos_token_id=0, pad_token_id=0),
                 causal_batches(batch, seq, v), hf_loss, hf_adamw,
                 f"causal LM, 2 key-value heads, sliding window {seq // 2}, {tokens}"),
        Workload("T5 tiny",
                 hf("T5Config", "T5ForConditionalGeneration", vocab_size=v, d_model=64, d_kv=16, d_ff=128,
                    num_layers=2, num_decoder_layers=2, num_heads=4, dropout_rate=0.0, decoder_start_token_id=0,
                    pad_token_id=0, eos_token_id=1),
                 seq2seq_batches(batch, seq, v), hf_loss, hf_adamw, f"encoder-decoder, targets {seq // 2}, {tokens}"),
    ]


def vision(size: str, batch: int | None = None, quick: bool = False) -> list[Workload]:
    """Benchmark 15: torchvision's ResNet and timm's ViT.

    ``small``: ResNet-50 and ViT-small/16 at 224x224, 1000 classes, batch 8
    (a step takes a few seconds on 2 cores). ``tiny``: ResNet-18 and a
    2-block ViT of width 64 (patch 8) at 64x64, batch 4, 10 classes (batch
    norm over 4 images of 64x64 leaves 16 numbers a channel at the last
    stage: enough to compare with eager's)."""
    def tv(name, classes):
        def build():
            import torchvision

            if name == "resnet10":  # torchvision's ResNet class with one basic block a stage
                from torchvision.models.resnet import BasicBlock, ResNet

                return ResNet(BasicBlock, [1, 1, 1, 1], num_classes=classes).train()
            return getattr(torchvision.models, name)(weights=None, num_classes=classes).train()

        return build

    def vit(classes, image, **kw):
        def build():
            import timm

            return timm.create_model("vit_small_patch16_224" if not kw else "vit_tiny_patch16_224", pretrained=False,
                                     num_classes=classes, img_size=image, **kw).train()

        return build

    if size == "small":
        b, image, classes = batch or 8, 224, 1000
        models = [("torchvision ResNet-50", tv("resnet50", classes), tv_sgd(b), "SGD momentum 0.9, lr 0.1 x batch / 256, cosine"),
                  ("timm ViT-small/16", vit(classes, image), timm_adamw, "timm AdamW, cosine with warm-up")]
    elif quick:  # the CI smoke run: one small convolutional network with batch norm
        b, image, classes = batch or 8, 32, 10
        models = [("torchvision ResNet-10 (ResNet-18's blocks, one a stage)", tv("resnet10", classes), tv_sgd(b),
                   "SGD momentum 0.9, lr 0.1 x batch / 256, cosine")]
    else:
        b, image, classes = batch or 4, 64, 10
        models = [("torchvision ResNet-18", tv("resnet18", classes), tv_sgd(b), "SGD momentum 0.9, lr 0.1 x batch / 256, cosine"),
                  ("timm ViT 2 blocks, width 64", vit(classes, image, patch_size=8, depth=2, embed_dim=64, num_heads=4),
                   timm_adamw, "timm AdamW, cosine with warm-up")]
    return [Workload(name, build, image_batches(b, image, classes), image_loss, opt,
                     f"{image}x{image}, batch {b}, {classes} classes; {what}")
            for name, build, opt, what in models]


# --- benchmark 17: recurrent layers ----------------------------------------------------------------


def word_lm(vocab, width, layers):
    """PyTorch's examples/word_language_model ``RNNModel`` with an LSTM: an
    embedding, ``layers`` LSTM layers, a linear decoder (sequence-first)."""
    import torch

    class RNNModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = torch.nn.Embedding(vocab, width)
            self.rnn = torch.nn.LSTM(width, width, layers)
            self.decoder = torch.nn.Linear(width, vocab)

        def forward(self, ids):
            out, _ = self.rnn(self.encoder(ids))
            return self.decoder(out)

    return RNNModel().train()


def examples_sgd(lr, clip):
    """The examples' word language model: plain SGD at ``lr``, gradients clipped at ``clip``."""

    def make(model, total):
        import torch

        return torch.optim.SGD(model.parameters(), lr=lr), (lambda: None), clip

    return make


def plain_adam(model, total):
    import torch

    return torch.optim.Adam(model.parameters(), lr=1e-3), (lambda: None), None


def recurrent(quick: bool = False) -> list[Workload]:
    """Benchmark 17: recurrent layers trained as users write them (issue 40).
    The word language model of PyTorch's examples (sequence-first, 35 steps
    of batch 20, its lr 20 and clipping at 0.25; dropout 0 so that every
    variant draws nothing) and a bidirectional GRU tagger (batch-first,
    Adam). ``quick``: 2 layers of width 16 over 8 steps."""
    vocab, width, bptt, batch = (50, 16, 8, 4) if quick else (1000, 128, 35, 20)

    def lm_batches(g, k):
        import torch

        return [{"ids": torch.randint(0, vocab, (bptt + 1, batch), generator=g)} for _ in range(k)]

    def lm_loss(model, b):
        import torch.nn.functional as F

        ids = b["ids"]
        return F.cross_entropy(model(ids[:-1]).reshape(-1, vocab), ids[1:].reshape(-1))

    def tagger():
        import torch

        class Tagger(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = torch.nn.Embedding(vocab, width)
                self.rnn = torch.nn.GRU(width, width, batch_first=True, bidirectional=True)
                self.out = torch.nn.Linear(2 * width, 9)

            def forward(self, ids):
                return self.out(self.rnn(self.embed(ids))[0])

        return Tagger().train()

    def tag_batches(g, k):
        import torch

        return [{"ids": torch.randint(0, vocab, (batch, bptt), generator=g),
                 "tags": torch.randint(0, 9, (batch, bptt), generator=g)} for _ in range(k)]

    def tag_loss(model, b):
        import torch.nn.functional as F

        return F.cross_entropy(model(b["ids"]).reshape(-1, 9), b["tags"].reshape(-1))

    return [Workload(f"word LM, 2-layer LSTM {width}", lambda: word_lm(vocab, width, 2), lm_batches, lm_loss,
                     examples_sgd(20.0, 0.25),
                     f"{bptt} steps x batch {batch}, vocabulary {vocab}; SGD lr 20, clip 0.25"),
            Workload(f"bidirectional GRU tagger {width}", tagger, tag_batches, tag_loss, plain_adam,
                     f"batch {batch} x {bptt} tokens, 9 tags; Adam lr 1e-3")]
