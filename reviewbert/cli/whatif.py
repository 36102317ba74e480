"""``reviewbert whatif``: counterfactuals of one review, or the brittleness of a checkpoint.

    reviewbert whatif --checkpoint DIR "TEXT" [--json]     one review, all three kinds
    reviewbert whatif --checkpoint DIR --n 300 [--json]    brittleness over the test split
"""
from __future__ import annotations

import json
import sys

from reviewbert.cli import UsageError, flags


def add_parser(sub):
    from reviewbert.explain import methods as explain
    from reviewbert.whatif import brittleness
    from reviewbert.whatif import counterfactuals as whatif
    w = sub.add_parser(
        "whatif", help="counterfactuals of a review, or the brittleness of a checkpoint",
        description="With a TEXT: the review's minimal deletion flip, each sentence dropped "
                    "and HotFlip swaps towards each neighbouring rating, every one checked by "
                    "its own forward pass. With --n: the minimal deletion flip of n reviews of "
                    "the checkpoint's test split (cached in CHECKPOINT/whatif/; an interrupted "
                    "run resumes).")
    flags.checkpoint(w)
    w.add_argument("text", nargs="?", default=None, help="one review text")
    flags.n(w, None, "brittleness: test reviews to score (300 for the docs' figures)")
    flags.data(w, "the checkpoint's training files, if not where its reviewbert.json says")
    flags.seed(w, "seed of the sample (default: 0)")
    w.add_argument("--method", default=None, choices=explain.METHOD_NAMES,
                   help="ranking the deletion flip follows (default: "
                        f"{whatif.DEFAULT_METHOD} for a TEXT, {brittleness.DEFAULT_METHOD} for --n)")
    w.add_argument("--max-words", type=int, default=whatif.MAX_WORDS,
                   help=f"give up beyond this many deleted words (default: {whatif.MAX_WORDS})")
    flags.no_cache(w)
    flags.json_output(w)
    return w


def run(args) -> int:
    if args.max_words < 1:
        raise UsageError("--max-words must be at least 1")
    if args.text is not None and args.n is not None:
        raise UsageError("give either a review TEXT or --n, not both")
    if args.text is None and args.n is None:
        raise UsageError("give a review TEXT, or --n N for the brittleness of N test reviews")
    if args.n is not None and args.n < 1:
        raise UsageError("--n must be at least 1")
    import torch

    from reviewbert.model.checkpoint import checkpoint_info
    from reviewbert.model.inference import Predictor
    info = checkpoint_info(args.checkpoint)
    predictor = Predictor.from_checkpoint(info.path, torch.device("cpu"))
    if args.text is not None:
        return _one_review(predictor, args)
    return _brittleness(predictor, info, args)


def _one_review(predictor, args) -> int:
    from reviewbert.whatif import counterfactuals as whatif
    if not args.text.strip():
        raise UsageError("review text is empty")
    pred = predictor.predict(args.text)
    if not pred.words:
        raise UsageError("the text has no character the model reads")
    from reviewbert.progress import TqdmProgress
    with TqdmProgress(3, "counterfactuals", unit="kind") as bar:
        def progress(step, total, what):
            bar(1)
            bar.describe(f"counterfactuals ({what} done)")
        cf = whatif.counterfactuals(predictor, pred, args.method or whatif.DEFAULT_METHOD,
                                    args.max_words, progress=progress)
    print(f"{pred.label} ({pred.probs[pred.label_id]:.1%}), {pred.n_tokens} tokens")
    print(cf.deletion.sentence(pred))
    names = predictor.scheme.names
    for text, d in zip(cf.sentences.sentences, cf.sentences.deltas):
        short = " ".join(text.split())
        short = short if len(short) <= 60 else short[:59] + "…"
        print(f"  without «{short}»: " + ", ".join(f"{n} {v:+.3f}" for n, v in zip(names, d)))
    for c, swaps in cf.hotflip.by_class.items():
        print(f"HotFlip towards {names[c]}: " + ("; ".join(
            f"{s.what} → {names[s.label_id]} (p {s.probs[c]:.2f})" for s in swaps) or "none"))
    if args.json:
        print(json.dumps(cf.to_json(pred)))
    return 0


def _brittleness(predictor, info, args) -> int:
    from reviewbert.cli.faithfulness import split_examples
    from reviewbert.whatif import brittleness
    examples = split_examples(info, predictor.tokenizer, args.data)
    if not examples:
        raise UsageError("the test split is empty")
    chosen = [examples[i] for i in brittleness.sample(len(examples), args.n, args.seed)]
    from reviewbert.progress import TqdmProgress
    settings = brittleness.Settings(args.method or brittleness.DEFAULT_METHOD, args.max_words)
    with TqdmProgress(len(chosen), "brittleness") as bar:
        result = brittleness.measure(predictor, info.path, [e.text for e in chosen],
                                 [int(e.stars) for e in chosen], settings, sample_seed=args.seed,
                                 progress=bar, use_cache=not args.no_cache)
    summary = brittleness.summarize(result)
    where = "cached" if result.from_cache else f"{result.seconds:.0f} s"
    print(f"checkpoint {info.path}: {result.n} test reviews (seed {args.seed}, {where}), "
          f"ranking {result.settings['method']}, at most {result.settings['max_words']} words")
    for row in brittleness.table_rows(result, summary):
        print("  " + " | ".join(f"{k}: {v}" for k, v in row.items()))
    for line in brittleness.reading(result, summary):
        print(line)
    if result.cache_error:
        print(f"note: {result.cache_error}", file=sys.stderr)
    if args.json:
        print(json.dumps(brittleness.summary_json(result, summary)))
    return 0
