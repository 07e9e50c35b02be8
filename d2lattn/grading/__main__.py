"""Command line: ``python -m d2lattn.grading release SOURCE --out DIR``,
``python -m d2lattn.grading grade SUBMISSIONS --bundle DIR --out DIR`` and
``python -m d2lattn.grading merge OUT SHARD_OUT...``."""
import argparse
import sys
from pathlib import Path

from .batch.grade_folder import grade
from .batch.gradebook import Exports, merge, read_roster
from .limits import CASE_SECONDS, MAX_BYTES, MAX_CODE, MAX_OUTPUT, NOTEBOOK_SECONDS
from .releasing import release
from .sandbox.channel import SandboxError

UNSAFE = ("run the notebooks WITHOUT a sandbox (where bubblewrap is missing): a submission can "
          "then read the bundle and change the grades; only for notebooks you trust")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m d2lattn.grading", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    command = _command(commands)
    rel = command("release", "write student notebooks and the autograder bundle")
    rel.add_argument("source", help="a folder of master notebooks, or one master notebook")
    rel.add_argument("--out", default="_build/exercises", help="the output folder")
    rel.add_argument("--hidden", metavar="FILE",
                     help="your private file of extra hidden cases ('# TESTS "
                          "<assignment>.<question>' sections), kept outside the repository: "
                          "added to the bundle only, never to a student notebook")
    rel.add_argument("--unsafe", action="store_true", help=UNSAFE)
    gra = command("grade", "grade a folder of submitted notebooks")
    gra.add_argument("submissions", help="a folder: one .ipynb file per student, or one folder "
                                         "per student holding one notebook (GitHub Classroom)")
    gra.add_argument("--bundle", default="_build/exercises/autograder",
                     help="the autograder folder written by release")
    gra.add_argument("--out", default="grades", help="the output folder; rows of students "
                                                     "not graded now are kept")
    gra.add_argument("--assignment", help="the bundle's assignment (default: the one the "
                                          "notebooks name, or the bundle's only one)")
    gra.add_argument("--roster", help="a CSV of the class: e-mail, login and/or id columns, "
                                      "optionally name (Canvas's gradebook export or Moodle's "
                                      "participants export, as they are)")
    _export_options(gra)
    gra.add_argument("--shard", type=_shard, help="I/N: grade only the I-th of N shares of the "
                                                  "class, then join them with merge")
    gra.add_argument("--identity", action="append", type=_identity, metavar="FILE=STUDENT",
                     help="the student a submission file (or folder) belongs to, whatever its "
                          "name or # STUDENT cell say; also lets a re-grade replace that "
                          "student's rows from another file (repeat for several)")
    gra.add_argument("--timeout", type=float, default=NOTEBOOK_SECONDS,
                     help="seconds for a notebook's code cells, in each of its sandboxes")
    gra.add_argument("--case-timeout", type=float, default=CASE_SECONDS,
                     help="seconds per test example")
    gra.add_argument("--max-output", type=int, default=MAX_OUTPUT,
                     help="characters of output kept per notebook")
    gra.add_argument("--max-bytes", type=int, default=MAX_BYTES,
                     help="larger submission files are not read")
    gra.add_argument("--max-code", type=int, default=MAX_CODE,
                     help="submissions with more characters of code are not run")
    gra.add_argument("--jobs", type=int, help="submissions graded at a time (default: cores)")
    gra.add_argument("--unsafe", action="store_true", help=UNSAFE)
    mer = command("merge", "join the outputs of grade --shard runs into one")
    mer.add_argument("out", help="the folder to write (rows already there are kept)")
    mer.add_argument("shards", nargs="+", help="the --out folders of the shards")
    mer.add_argument("--roster", help="the roster the shards were graded with")
    _export_options(mer, "(default: as the shards were graded)")
    args = parser.parse_args(argv)
    try:
        _run(args)
    except (SandboxError, ValueError, OSError) as err:  # one line, not a traceback
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)


class _Defaults(argparse.ArgumentDefaultsHelpFormatter):
    """Help that shows each option's default, where it has one."""

    def _get_help_string(self, action):
        if action.default in (None, False):
            return action.help
        return super()._get_help_string(action)


def _command(commands):
    def command(name, text):
        return commands.add_parser(name, help=text, description=text, formatter_class=_Defaults)
    return command


def _export_options(command, default=""):
    command.add_argument("--canvas-assignment", metavar="COLUMN",
                         help="canvas.csv's grade column: 'Name (123)', copied from a Canvas "
                              "gradebook export, maps it to Canvas's assignment 123 (digits "
                              "alone: '<assignment> (<digits>)'; default: the assignment's "
                              f"name) {default}".strip())
    command.add_argument("--missing-as-zero", action="store_true",
                         help="export 0, not a blank, for a roster student with no submission "
                              f"{default}".strip())


def _exports(args):
    return Exports(args.canvas_assignment, args.missing_as_zero)


def _identity(text):
    file, sep, student = text.partition("=")
    if not (sep and file and student):
        raise argparse.ArgumentTypeError(f"not FILE=STUDENT: {text!r}")
    return file, student


def _shard(text):
    try:
        index, count = map(int, text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not I/N: {text!r}") from None
    if not 1 <= index <= count:
        raise argparse.ArgumentTypeError(f"I/N needs 1 <= I <= N, got {text!r}")
    return index, count


def _run(args):
    if args.command == "release":
        for path in release(args.source, args.out, unsafe=args.unsafe,
                            hidden=args.hidden):
            print(f"wrote {path}")
    elif args.command == "grade":
        rows = grade(args.submissions, args.bundle, args.out, args.assignment, args.timeout,
                     args.case_timeout, args.max_output, log=print, unsafe=args.unsafe,
                     max_bytes=args.max_bytes, jobs=args.jobs, roster=args.roster,
                     shard=args.shard, max_code=args.max_code, progress=True,
                     exports=_exports(args), identities=dict(args.identity or ()))
        print(f"wrote {len(rows)} rows to {Path(args.out) / 'grades.csv'}")
    else:
        roster = read_roster(args.roster) if args.roster else []
        given = args.canvas_assignment is not None or args.missing_as_zero
        rows = merge(args.out, args.shards, roster, _exports(args) if given else None)
        print(f"merged {len(args.shards)} shards: {len(rows)} rows in "
              f"{Path(args.out) / 'grades.csv'}")


if __name__ == "__main__":
    main()
