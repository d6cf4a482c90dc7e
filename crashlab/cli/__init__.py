"""The ``crashlab`` command: the group, and the table of its verbs, each imported on use.

A verb's module (crashlab/cli/<verb>.py) only declares its options and hands them to its
package; no triage logic lives here. ``crashlab --help`` lists every verb with the summary the
table holds, so that it imports none of them; ``crashlab VERB`` imports that verb's module only
(pip's commands_dict does the same). Their modules import what does the work inside the command:
--help pays neither for pydantic, pyelftools and rich, nor inspect for pexpect, requests and the
supervisor, nor replay for the coredump reader (tests/test_cli.py holds --help to it).

Every verb runs inside one guard (crashlab.guard): bad input is one line on stderr and exit 2
(usage errors included), a missing tool or service exit 3, never a traceback.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any, NamedTuple

import click

from ..errors import EXIT_BAD_INPUT
from ..guard import GuardedGroup
from ..version import __version__


class Verb(NamedTuple):
    #: the module that declares the verb's command
    module: str
    #: the command's name in that module
    attribute: str
    #: its line in ``crashlab --help``: the first sentence of its help
    summary: str


#: crashlab VERB -> where its command is and its line in crashlab --help.
VERBS: dict[str, Verb] = {
    "bisect": Verb("crashlab.cli.bisect", "bisect",
                   "Find the commit (or release) that brought a crash: check out, build, "
                   "serve, replay, judge, halve."),
    "debug": Verb("crashlab.cli.debug", "debug",
                  "Open cuda-gdb on a CUDA coredump, its focus already on the first fault."),
    "doctor": Verb("crashlab.cli.env", "doctor",
                   "Check this machine before it crashes: builds against another torch, CUDA "
                   "toolchain mismatches, FlashInfer's missing modules and stale JIT cache, and "
                   "what would stop a crash from being captured."),
    "dump-now": Verb("crashlab.cli.dumpnow", "dump_now",
                     "Capture a hung server now: host samples of every rank, then one GPU dump "
                     "of each process."),
    "env": Verb("crashlab.cli.env", "env",
                "What sglang.check_env reports, taken without touching CUDA: OS, Python, NVIDIA "
                "driver and GPUs, CUDA toolkit, package versions (from metadata, nothing "
                "imported), topology and the relevant environment variables, secrets masked."),
    "gc": Verb("crashlab.cli.index", "gc",
               "Delete the coredumps of known crashes beyond the retention, and mark them gone "
               "in the index (their crash records stay)."),
    "inspect": Verb("crashlab.cli.inspect", "inspect",
                    "Explain a CUDA GPU coredump: faulting kernel, exception, block, thread, PC, "
                    "SASS, source."),
    "list": Verb("crashlab.cli.index", "list_command",
                 "List recorded crashes, newest first, one line each (like coredumpctl list)."),
    "replay": Verb("crashlab.cli.replay", "replay",
                   "Load an SGLang crash dump safely, replay it against a server, minimize it."),
    "report": Verb("crashlab.cli.report", "report",
                   "Write an upstream issue: a Markdown body and one .tar.gz to attach beside "
                   "it."),
    "schema": Verb("crashlab.cli.schema", "schema", "Print the JSON Schema of a report."),
    "serve": Verb("crashlab.cli.serve", "serve",
                  "Run a server under watch; when it crashes, keep every artifact and triage "
                  "it."),
    "show": Verb("crashlab.cli.index", "show",
                 "Show one recorded crash (its facts, its incident and its report), a signature "
                 "(how many crashes, on which hosts, GPUs, drivers and versions, first and last "
                 "seen), or a coarse key (the signatures under it, which differ only in their "
                 "site: the same bug where source lines moved between releases)."),
    "ui": Verb("crashlab.cli.ui", "ui",
               "Serve a read-only web page of the crash index: the top signatures, each "
               "signature's facets and charts, each crash's triage and files, each incident's "
               "timeline."),
}


class VerbCommands(MutableMapping[str, click.Command]):
    """The group's commands by name, as click keeps them, each imported the first time it is
    looked up: iterating names imports nothing. A verb is added to the table, not to this."""

    def __init__(self, verbs: Mapping[str, Verb]) -> None:
        self._verbs = verbs
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            verb = self._verbs[name]
            self._loaded[name] = getattr(importlib.import_module(verb.module), verb.attribute)
        return self._loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        raise TypeError(f"{name}: crashlab's verbs are declared in crashlab.cli.VERBS")

    def __delitem__(self, name: str) -> None:
        raise TypeError(f"{name}: crashlab's verbs are declared in crashlab.cli.VERBS")

    def __iter__(self) -> Iterator[str]:
        return iter(self._verbs)

    def __len__(self) -> int:
        return len(self._verbs)


class VerbGroup(GuardedGroup):
    """A group whose verbs come from a table: listed from it, imported one at a time."""

    def __init__(self, *args: Any, verbs: Mapping[str, Verb], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.verbs = verbs
        self.commands = VerbCommands(verbs)

    def list_commands(self, ctx: click.Context) -> list[str]:
        """The verbs' names, from the table: nothing is imported."""
        return sorted(self.verbs)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The verb's command, its module imported now (None: no such verb, click says so)."""
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The verbs and their summaries from the table, none of them imported."""
        with formatter.section("Commands"):
            formatter.write_dl([(name, self.verbs[name].summary)
                                for name in self.list_commands(ctx)])


@click.group(cls=VerbGroup, verbs=VERBS, invoke_without_command=True, no_args_is_help=False,
             context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="crashlab", help="Print crashlab's version.")
@click.pass_context
def main(ctx: click.Context) -> None:
    """Crash forensics for GPU LLM serving: read CUDA coredumps without a GPU, replay SGLang
    crash dumps, supervise a server and triage its crash.

    Exit codes: 0 found what was looked for (a fault, a reproduction, a crash caught), 1 found
    nothing, 2 bad input or usage, 3 a missing tool or service; but doctor, a check, the other
    way round as a linter: 0 no finding, 1 findings. crashlab with no command prints
    this help on standard output and exits 2: a command line without a verb is incomplete.
    """
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())
        ctx.exit(EXIT_BAD_INPUT)
