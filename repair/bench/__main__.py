"""`python -m repair.bench {align,hf,parse,purity,resume,scale,translate} [options]`: run one benchmark, last line JSON."""

from __future__ import annotations

import importlib
import sys

from repair.errors import exit_on_user_error

BENCHMARKS = {
    "align": "repair.bench.align",
    "hf": "repair.bench.hf_opus",
    "parse": "repair.bench.parse",
    "purity": "repair.bench.purity",
    "resume": "repair.bench.resume",
    "scale": "repair.bench.scale",
    "translate": "repair.bench.translate",
}


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in BENCHMARKS:
        print(f"usage: python -m repair.bench {{{','.join(BENCHMARKS)}}} [options]", file=sys.stderr)
        sys.exit(2)
    module = importlib.import_module(BENCHMARKS[argv[0]])
    module.main(argv[1:])


if __name__ == "__main__":
    main()
