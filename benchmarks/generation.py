"""Greedy ``generate()`` of a transformers causal LM on the lazy device vs eager torch (issue 40 item 3).

For a tiny random GPT-2 (2 layers, width 64, vocabulary 128) or, with
``--model gpt2-small``, GPT-2 small's shape (12 x 768, random weights; nothing
is downloaded): time to first token (``max_new_tokens=1``), time per later
token (``(T(N) - T(1)) / (N - 1)``), and the programs compiled (``compiles``
plus persistent-cache loads; the cache is off here) for N new tokens, with the
default cache and with ``cache_implementation="static"``. The lazy device's
first call (cold: it compiles) and second call (warm: every program cached)
are timed separately, the time to first token warm; tokens are checked
against eager's.

    python benchmarks/generation.py [--model tiny|gpt2-small] [--tokens 64]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("LAZYCORE_CACHE_DIR", "off")  # count every program this run compiles

import torch  # noqa: E402
import transformers  # noqa: E402

import lazycore  # noqa: E402
import lazycore.torch as ltorch  # noqa: E402


def _model(name: str):
    if name == "tiny":
        cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=128, n_positions=256)
    else:
        cfg = transformers.GPT2Config(n_layer=12, n_embd=768, n_head=12, vocab_size=50257, n_positions=1024)
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(cfg).eval()


def _programs() -> int:
    c = lazycore.metrics.counters()
    return c["compiles"] + c.get("disk_cache_hits", 0)


def _timed(model, ids, n, cache):
    kw = dict(max_new_tokens=n, do_sample=False, pad_token_id=0)
    if cache == "static":
        kw["cache_implementation"] = "static"
    before = _programs()
    start = time.perf_counter()
    out = model.generate(ids, **kw)
    out = out.cpu()
    return out, time.perf_counter() - start, _programs() - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", choices=["tiny", "gpt2-small"])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--prompt", type=int, default=8)
    args = parser.parse_args()
    n = args.tokens
    model = _model(args.model)
    vocab = model.config.vocab_size
    torch.manual_seed(1)
    ids = torch.randint(1, vocab, (1, args.prompt))
    dev = ltorch.device()
    rows, wants = [], {}
    for cache in ("dynamic", "static"):
        _timed(model, ids, 2, cache)  # eager warm-up
        wants[cache], e_n, _ = _timed(model, ids, n, cache)
        _, e_1, _ = _timed(model, ids, 1, cache)
        rows.append((cache, "eager", e_1, (e_n - e_1) / (n - 1), 0, True))
    model.to(dev)
    lazy_ids = ids.to(dev)
    for cache in ("dynamic", "static"):
        want = wants[cache]
        got, cold, cold_programs = _timed(model, lazy_ids, n, cache)
        got2, l_n, warm_programs = _timed(model, lazy_ids, n, cache)
        _timed(model, lazy_ids, 1, cache)  # one new token compiles its own (the length criterion is true at once)
        _, l_1, _ = _timed(model, lazy_ids, 1, cache)
        same = torch.equal(got, want) and torch.equal(got2, want)
        rows.append((cache, f"lazy cold {cold:.2f} s, {cold_programs} programs ({cold_programs / n:.3f} per token, "
                            f"{lazycore.metrics.counters()['generated_tokens']} tokens counted so far); warm {warm_programs}",
                     l_1, (l_n - l_1) / (n - 1), cold_programs, same))
    print(f"{args.model}: prompt {args.prompt}, {n} new tokens, greedy")
    print(f"{'cache':8} {'first token ms':>15} {'per token ms':>13}  eager's tokens  run")
    for cache, what, first, per, _, same in rows:
        print(f"{cache:8} {first * 1e3:15.1f} {per * 1e3:13.2f}  {str(same):14}  {what}")


if __name__ == "__main__":
    main()
