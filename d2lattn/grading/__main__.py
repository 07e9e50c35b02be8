"""Command line: ``python -m d2lattn.grading release SOURCE --out DIR``,
``python -m d2lattn.grading grade SUBMISSIONS --bundle DIR --out DIR`` and
``python -m d2lattn.grading merge OUT SHARD_OUT...``."""
import argparse
import sys
from pathlib import Path

from .batch.grade_folder import grade
from .batch.gradebook import Exports, read_rows
from .batch.options import GradeOptions
from .batch.record import merge
from .releasing import CHECKED_SEEDS, release
from .sandbox.channel import SandboxError

DEFAULT = GradeOptions()  # each option's default, defined there once

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
    rel.add_argument("--seeds", type=int, default=CHECKED_SEEDS,
                     help="drawn variants each master with a # VARIANT cell is checked on "
                          "(its cases pass, no trivial answer passes)")
    rel.add_argument("--roster", help="a CSV of the class (as grade reads it): each student "
                                      "gets their own variant, OUT/students/<student>/<file> "
                                      "(needs --secret)")
    rel.add_argument("--secret", metavar="FILE",
                     help="the course's secret (a file of at least 16 bytes kept outside the "
                          "repository): it draws each student's variant and signs its record")
    rel.add_argument("--variants", type=int, help="variants the class shares (default: one "
                                                  "per student)")
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
                                      "participants export, as they are; default: the copy "
                                      "recorded in OUT by an earlier run)")
    _export_options(gra)
    gra.add_argument("--shard", type=_shard, help="I/N: grade only the I-th of N shares of the "
                                                  "class, then join them with merge")
    gra.add_argument("--identity", action="append", type=_identity, metavar="FILE=STUDENT",
                     help="the student a submission file (or folder) belongs to, whatever its "
                          "name or # STUDENT cell say; also lets a re-grade replace that "
                          "student's rows from another file (repeat for several)")
    gra.add_argument("--timeout", type=float, default=DEFAULT.timeout,
                     help="seconds for a notebook's code cells, in each of its sandboxes")
    gra.add_argument("--case-timeout", type=float, default=DEFAULT.case_timeout,
                     help="seconds per test example")
    gra.add_argument("--max-output", type=int, default=DEFAULT.max_output,
                     help="characters of output kept per notebook")
    gra.add_argument("--max-bytes", type=int, default=DEFAULT.max_bytes,
                     help="larger submission files are not read")
    gra.add_argument("--max-code", type=int, default=DEFAULT.max_code,
                     help="submissions with more characters of code are not run")
    gra.add_argument("--jobs", type=int, help="submissions graded at a time (default: cores)")
    gra.add_argument("--unsafe", action="store_true", help=UNSAFE)
    mer = command("merge", "join the outputs of grade --shard runs into one")
    mer.add_argument("out", help="the folder to write (rows already there are kept)")
    mer.add_argument("shards", nargs="+", help="the --out folders of the shards")
    mer.add_argument("--roster", help="the roster (default: the one OUT, else the first "
                                      "shard, was graded with)")
    _export_options(mer)
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


def _export_options(command):
    recorded = "; a later run into OUT reuses it, and refuses another without --new-exports"
    command.add_argument("--canvas-assignment", metavar="COLUMN",
                         help="canvas.csv's grade column: 'Name (123)', copied from a Canvas "
                              "gradebook export, maps it to Canvas's assignment 123 (digits "
                              "alone: '<assignment> (<digits>)'; a name without an id is "
                              "refused; default: the assignment's name, which Canvas imports "
                              f"as a new assignment){recorded}")
    command.add_argument("--missing-as-zero", action="store_true", default=None,
                         help="export 0, not a blank, for a roster student with no submission"
                              f"{recorded}")
    command.add_argument("--new-exports", action="store_true",
                         help="replace the export settings recorded in OUT by those given now "
                              "(their defaults where not given)")


def _exports(args):
    """The :class:`Exports` settings given on the command line (None where not given)."""
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
        for path in release(args.source, args.out, unsafe=args.unsafe, hidden=args.hidden,
                            seeds=args.seeds, roster=args.roster, secret=args.secret,
                            variants=args.variants):
            print(f"wrote {path}")
    elif args.command == "grade":
        out = Path(args.out)
        rows = grade(args.submissions, args.bundle, out, GradeOptions(
            assignment=args.assignment, roster=args.roster, exports=_exports(args),
            new_exports=args.new_exports, identities=dict(args.identity or ()),
            shard=args.shard, timeout=args.timeout, case_timeout=args.case_timeout,
            max_output=args.max_output, max_bytes=args.max_bytes, max_code=args.max_code,
            jobs=args.jobs, unsafe=args.unsafe, log=print, progress=True))
        count = len({row.student for row in rows})
        print(f"graded {count} submission{'s' * (count != 1)} ({len(rows)} rows); "
              f"{_holds(out)}")
    else:
        merge(args.out, args.shards, args.roster, _exports(args), args.new_exports, print)
        print(f"merged {len(args.shards)} shards: {_holds(Path(args.out))}")


def _holds(out):
    """E.g. 'grades/grades.csv holds 96 rows of 16 students'."""
    held = read_rows(out / "grades.csv")
    return (f"{out / 'grades.csv'} holds {len(held)} rows of "
            f"{len({row.student for row in held})} students")


if __name__ == "__main__":
    main()
