"""Command line: ``python -m d2lattn.grading release SOURCE --out DIR`` and
``python -m d2lattn.grading grade SUBMISSIONS --bundle DIR --out DIR``."""
import argparse
import sys

from .batch import MAX_BYTES, grade
from .releasing import release
from .sandbox import SandboxError


UNSAFE = ("run the notebooks WITHOUT a sandbox (where bubblewrap is missing): a submission can "
          "then read the bundle and change the grades; only for notebooks you trust")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m d2lattn.grading", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    rel = commands.add_parser("release", help="write student notebooks and the autograder bundle")
    rel.add_argument("source", help="a folder of master notebooks, or one master notebook")
    rel.add_argument("--out", default="_build/exercises", help="default: %(default)s")
    rel.add_argument("--unsafe", action="store_true", help=UNSAFE)
    gra = commands.add_parser("grade", help="grade a folder of submitted notebooks")
    gra.add_argument("submissions", help="a folder: each file in it is one student's submission")
    gra.add_argument("--bundle", default="_build/exercises/autograder", help="default: %(default)s")
    gra.add_argument("--out", default="grades", help="default: %(default)s")
    gra.add_argument("--assignment", help="the bundle's assignment (if it holds more than one)")
    gra.add_argument("--timeout", type=float, default=300, help="seconds per notebook")
    gra.add_argument("--case-timeout", type=float, default=10, help="seconds per test example")
    gra.add_argument("--max-output", type=int, default=1_000_000,
                     help="characters of output kept per notebook")
    gra.add_argument("--max-bytes", type=int, default=MAX_BYTES,
                     help="larger submission files are not read (default: %(default)s)")
    gra.add_argument("--jobs", type=int, help="submissions graded at a time (default: cores)")
    gra.add_argument("--unsafe", action="store_true", help=UNSAFE)
    args = parser.parse_args(argv)
    try:
        _run(args)
    except SandboxError as err:  # the sandbox cannot run here, or failed for every student
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)


def _run(args):
    if args.command == "release":
        for path in release(args.source, args.out, unsafe=args.unsafe):
            print(f"wrote {path}")
    else:
        rows = grade(args.submissions, args.bundle, args.out, args.assignment, args.timeout,
                     args.case_timeout, args.max_output, log=print, unsafe=args.unsafe,
                     max_bytes=args.max_bytes, jobs=args.jobs)
        print(f"wrote {len(rows)} rows to {args.out}/grades.csv")


if __name__ == "__main__":
    main()
