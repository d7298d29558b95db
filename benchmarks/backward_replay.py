"""Backward replay (frontends/torch/backward_replay.py) against the engine, in one process.

    python benchmarks/backward_replay.py gpt2|bert|llama|mistral|t5|resnet [--steps 20]

Two copies of one model (benchmark 14's tiny transformers configurations, or
torchvision's ResNet-18 at 2x3x32x32) train with AdamW side by side, torch on
one thread, the order of the two alternated every step; printed: the median
thread time of ``loss.backward()`` and of the step's Python (trace and
barrier, not the program), each step's compiles, the replay counts, and
whether the two copies' parameters are bitwise equal. Thread time, so the
figures hold up on a loaded machine better than wall-clock medians."""

import argparse
import statistics
import time

import torch

import lazycore
import lazycore.torch as ltorch
from lazycore.frontends.torch import backward_replay as br
from lazycore.observe import metrics


def make(name):
    import transformers

    torch.manual_seed(0)
    width = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
    if name == "resnet":
        import torchvision

        return torchvision.models.resnet18(weights=None, num_classes=10).train()
    if name == "gpt2":
        return transformers.GPT2LMHeadModel(transformers.GPT2Config(
            n_layer=2, n_embd=64, n_head=4, vocab_size=128, n_positions=256, resid_pdrop=0.0, embd_pdrop=0.0,
            attn_pdrop=0.0, bos_token_id=0, eos_token_id=0))
    if name == "bert":
        return transformers.BertForMaskedLM(transformers.BertConfig(
            vocab_size=128, max_position_embeddings=256, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
            **width))
    if name in ("llama", "mistral"):
        extra = dict(sliding_window=16) if name == "mistral" else {}
        cls = transformers.MistralForCausalLM if name == "mistral" else transformers.LlamaForCausalLM
        config = (transformers.MistralConfig if name == "mistral" else transformers.LlamaConfig)(
            vocab_size=128, max_position_embeddings=256, num_key_value_heads=2, bos_token_id=0, eos_token_id=0,
            pad_token_id=0, **width, **extra)
        return cls(config)
    return transformers.T5ForConditionalGeneration(transformers.T5Config(
        vocab_size=128, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4,
        dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1))


def loss_of(name, model, ids, g, dev):
    if name == "resnet":
        x = torch.randn(2, 3, 32, 32, generator=g).to(dev)
        return torch.nn.functional.cross_entropy(model(x), ids[:2, 0] % 10)
    if name == "t5":
        return model(input_ids=ids, labels=ids[:, :16].contiguous()).loss
    return model(ids, labels=ids).loss


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model", choices=["gpt2", "bert", "llama", "mistral", "t5", "resnet"])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--choose", action="store_true",
                   help="let the replaying copy weigh the engine against the replay by counts and keep the cheaper "
                        "(the default outside this benchmark); without it, it always replays")
    args = p.parse_args()
    br.SWITCH.choose = args.choose
    torch.set_num_threads(1)
    dev = ltorch.device()
    runs = {}
    for on in (False, True):
        model = make(args.model).to(dev)
        runs[on] = dict(model=model, opt=torch.optim.AdamW(model.parameters(), lr=1e-3),
                        g=torch.Generator().manual_seed(1), backward=[], step=[], compiles=[])
    for step in range(args.steps):
        for on in ((False, True) if step % 2 else (True, False)):
            br.SWITCH.on = on
            r = runs[on]
            ids = torch.randint(0, 128, (4, 32), generator=r["g"]).to(dev)
            c0 = metrics.counters()["compiles"]
            t0 = time.thread_time()
            r["opt"].zero_grad()
            loss = loss_of(args.model, r["model"], ids, r["g"], dev)
            t1 = time.thread_time()
            loss.backward()
            t2 = time.thread_time()
            r["opt"].step()
            lazycore.mark_step()
            t3 = time.thread_time()
            loss.item()
            r["backward"].append((t2 - t1) * 1e3)
            r["step"].append((t3 - t0) * 1e3)
            r["compiles"].append(metrics.counters()["compiles"] - c0)
    warm = args.steps // 3
    for on in (False, True):
        r = runs[on]
        print(f"{'replay' if on else 'engine'}: backward {statistics.median(r['backward'][warm:]):.2f} ms, "
              f"step's Python {statistics.median(r['step'][warm:]):.2f} ms, compiles {r['compiles']}")
    print(f"replays {br.Stats.replays}, recordings {br.Stats.recordings}, engine runs {br.Stats.engine}")
    for (kind, nodes), engine in br._CHOICES.items():
        print(f"choice for {kind.__name__} after {nodes} nodes: {'engine' if engine else 'replay'}")
    same = all(torch.equal(a.detach().cpu(), b.detach().cpu())
               for a, b in zip(runs[False]["model"].parameters(), runs[True]["model"].parameters()))
    print("parameters bitwise equal:", same)


if __name__ == "__main__":
    main()
