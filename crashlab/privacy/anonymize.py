"""Anonymization for a bundle that goes to a public tracker: where a crash happened and whose it was.

Redaction (redact.py) masks secrets; this goes further, for ``crashlab report --anonymize``:
host names, user names and home folders, and IP addresses are replaced wherever they appear in
text crashlab writes, each by a stable placeholder (the same host is the same placeholder
throughout a bundle, so a reader can still follow it from the launch command to the logs):

- IPv4 addresses become addresses of the documentation ranges (RFC 5737: 192.0.2.0/24,
  198.51.100.0/24, 203.0.113.0/24) and IPv6 ones addresses of 2001:db8::/32 (RFC 3849), so a
  command stays a valid command; loopback and unspecified addresses are kept (they say nothing);
- host names the launch names (``--host``, ``--dist-init-addr``, a URL's host, variables such
  as HOSTNAME, MASTER_ADDR, SGLANG_HOST_IP or NCCL_COMM_ID, the machine's own name), wherever
  they stand between characters that are not letters or digits (a run directory is named
  ``<time>-<host>-<pid>``), in any case; and names of three or more labels under
  a private suffix (``.internal``, ``.local``, ``.lan``, ``.corp``, ...), become
  ``host-N.example`` (RFC 2606 reserves .example);
- ``/home/NAME`` and ``/Users/NAME`` become ``/home/userN``, and the user names the environment
  gives (USER, LOGNAME) or those paths reveal become ``userN`` as words anywhere;
- a home folder elsewhere (``HOME=/data/alice``, ``/tmp/walkhome``), the launch's or that of the
  machine making the report, becomes ``/home/userN`` too, its owner's placeholder, wherever it
  stands as a folder (one directly under ``/``, such as ``/root``, says nothing and stays).

What it cannot know it cannot replace: a host only ever named in a log, with a public suffix,
stays. Version numbers with four parts (``10.0.0.1``) read as addresses and are replaced.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable, Mapping

from .redact import descend_json

#: Where the placeholders for IPv4 addresses come from, in turn (RFC 5737).
_DOCUMENTATION_V4 = ("192.0.2.", "198.51.100.", "203.0.113.")
#: A four-part number right after a version comparison (``cudnn==9.1.0.70``) is a version, not
#: an address; anywhere else the address reading wins, since a leaked address costs more.
_IPV4 = re.compile(r"(?<![\w.])(?<![=<>~!]=)(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}"
                   r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?![\w]|\.\d)")
#: An IPv6 candidate: hex groups and at least two colons; ipaddress decides.
_IPV6 = re.compile(r"(?<![\w:.])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?![\w:])")
_HOME = re.compile(r"(?P<base>/(?:home|Users))/(?P<name>[A-Za-z0-9._-]+)")
_URL_HOST = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://(?:[^/\s@]+@)?(?P<host>\[[0-9A-Fa-f:.]+\]|"
                       r"[A-Za-z0-9.-]+)")
#: Host names under a private suffix, three labels or more (``threading.local`` is Python's).
_PRIVATE_SUFFIX = r"(?:internal|local|localdomain|lan|corp|intranet|intra|home\.arpa|svc)"
_PRIVATE_HOST = re.compile(r"(?<![\w.-])(?:[A-Za-z0-9-]+\.){2,}" + _PRIVATE_SUFFIX + r"(?![\w-])",
                           re.IGNORECASE)
#: Environment variables and options whose value names a host (or host:port).
_HOST_NAME = re.compile(r"(?i)(?:^|_|-)(?:host|hostname|addr|address|server|endpoint|master|ip|"
                        r"comm_id)$")
_KEPT_HOSTS = {"localhost", "127.0.0.1", "0.0.0.0", "::", "::1", ""}
#: Values of a host-named variable that are switches, not names (SGLANG_USE_MASTER=true); a
#: value without a letter (``1``) is no name either.
_NOT_HOSTS = {"true", "false", "none", "null", "yes", "no", "on", "off"}
_LETTER = re.compile("[a-z]")
#: User names too common or too short to replace as words.
_KEPT_USERS = {"root", "user", "nobody", "admin", "ubuntu"}
MIN_USER_LENGTH = 3


#: The same patterns over bytes, for what cannot be rewritten (a coredump of gigabytes): (what
#: it finds, an anchor every match holds and that starts with a plain byte, which re looks for
#: at memory speed, the pattern run only around an anchor's hits).
_IN_BYTES = tuple((what, re.compile(anchor, flags), re.compile(pattern.pattern.encode(), flags))
                  for what, anchor, pattern, flags in (
    ("a home folder", rb"/(?:home|Users)/", _HOME, 0),
    ("a private host name", rb"\." + _PRIVATE_SUFFIX.encode(), _PRIVATE_HOST, re.IGNORECASE),
    ("an IPv4 address", rb"\.[0-9]{1,3}\.", _IPV4, 0),
    ("an IPv6 address", rb":[0-9A-Fa-f]{0,4}:", _IPV6, 0)))
#: How far from an anchor a match may reach; also the overlap of two chunks read apart.
BYTES_REACH = 256


def place_or_person_in(data: bytes) -> str | None:
    """What ``data`` holds that anonymizing would have replaced had it been text (a home folder,
    a private host name, an IP address other than loopback), named; None when nothing."""
    for what, anchor, pattern in _IN_BYTES:
        for hit in anchor.finditer(data):
            around = pattern.finditer(data, max(0, hit.start() - BYTES_REACH), hit.end() + BYTES_REACH)
            if any(_says_something(what, match.group()) for match in around):
                return what
    return None


#: An IPv6 address in bytes needs this many groups: a shorter one (``1::6``, ``fd00::17``) turns
#: up by chance a few times in every 10 MB of random bytes (GPU memory, machine code).
MIN_IPV6_GROUPS_IN_BYTES = 3


def _says_something(what: str, found: bytes) -> bool:
    if not what.startswith("an IP"):
        return True
    text = found.decode("ascii")
    if what == "an IPv6 address" and sum(1 for group in text.split(":") if group) < MIN_IPV6_GROUPS_IN_BYTES:
        return False
    try:
        return not _kept_address(ipaddress.ip_address(text), text)
    except ValueError:
        return False


def _host_part(value: str) -> str:
    """``host:port``, ``[v6]:port`` or ``host`` -> host."""
    value = value.strip()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def _hosts_in(argv: list[str], env: Mapping[str, str]) -> list[str]:
    found = []
    for index, token in enumerate(argv):
        name, equals, value = token.partition("=")
        if token.startswith("--") and _HOST_NAME.search(name.lstrip("-").replace("-", "_")):
            if equals:
                found.append(_host_part(value))
            elif index + 1 < len(argv):
                found.append(_host_part(argv[index + 1]))
    for name, value in env.items():
        if _HOST_NAME.search(name) and value and "/" not in value:
            found += [_host_part(part) for part in value.split(",")]
    for text in [*argv, *env.values()]:
        found += [_host_part(m["host"]) for m in _URL_HOST.finditer(text)]
    return found


def _kept_address(address: ipaddress.IPv4Address | ipaddress.IPv6Address, text: str) -> bool:
    """Loopback and unspecified addresses say nothing; a short link-local or loopback IPv6
    (``fe80::1``) is too short to tell from a C++ name. A private IPv6 (fc00::/7, ``fd00::17``)
    or a global one names a network, however short."""
    if address.is_loopback or address.is_unspecified:
        return True
    return (address.version == 6 and address.is_link_local
            and sum(1 for group in text.split(":") if group) < 3)


class Anonymizer:
    """Replaces host names, user names, home folders and IP addresses in text, consistently."""

    def __init__(self, hosts: Iterable[str] = (), users: Iterable[str] = ()):
        self._hosts: dict[str, str] = {}
        self._users: dict[str, str] = {}
        self._addresses: dict[str, str] = {}
        #: home folders outside /home and /Users -> their placeholder
        self._homes: dict[str, str] = {}
        self._home_pattern: re.Pattern | None = None
        for host in hosts:
            self.add_host(host)
        for user in users:
            self.add_user(user)

    @classmethod
    def for_launch(cls, argv: list[str], env: Mapping[str, str], hosts: Iterable[str] = (),
                   paths: Iterable[str] = (), here: Mapping[str, str] | None = None) -> Anonymizer:
        """One that knows the hosts, users and home folder of a launch (its command and
        environment), those of HERE (the environment of the machine making the report, where
        it differs), the given hosts (the machine's names), and the users whose home folders
        ``paths`` are in."""
        environments = [env] if here is None else [here, env]
        made = cls([*hosts, socket.gethostname(), *_hosts_in(argv, env)],
                   [each.get(name, "") for each in environments
                    for name in ("USER", "LOGNAME", "SUDO_USER")])
        for each in environments:
            made.add_home(each.get("HOME", ""), each.get("USER") or each.get("LOGNAME"))
        for text in [*paths, *argv, *env.values()]:
            for match in _HOME.finditer(text):
                made.add_user(match["name"])
        return made

    def add_home(self, home: str, user: str | None = None) -> None:
        """A home folder, named for USER where given: replaced as a folder wherever it stands.
        /home/NAME and /Users/NAME need none (their pattern covers every user's)."""
        home = home.rstrip("/")
        if not home.startswith("/") or home.count("/") < 2 or _HOME.fullmatch(home) or home in self._homes:
            return
        if user:
            self.add_user(user)
        self._homes[home] = f"/home/{self._users.get(user or '', 'user')}"
        self._home_pattern = re.compile(r"(?<![\w.-])(?:" + "|".join(
            re.escape(known) for known in sorted(self._homes, key=len, reverse=True)) + r")(?![\w.-])")

    @property
    def names(self) -> list[str]:
        """The host and user names it knows (to look for in files it cannot rewrite)."""
        return [*self._hosts, *self._users]

    def add_host(self, host: str) -> None:
        host = host.strip().rstrip(".").lower()  # DNS names are case-insensitive (RFC 4343)
        if (host in _KEPT_HOSTS or host in _NOT_HOSTS or not _LETTER.search(host)
                or self._is_address(host) or host in self._hosts):
            return
        self._hosts[host] = f"host-{len(self._hosts) + 1}.example"
        short = host.split(".", 1)[0]
        if short != host and len(short) >= 4 and short not in self._hosts:
            self._hosts[short] = self._hosts[host].removesuffix(".example")

    def add_user(self, user: str) -> None:
        """A user name to replace; a placeholder (``user1``, a home folder already replaced) is
        none."""
        if (len(user) >= MIN_USER_LENGTH and user not in _KEPT_USERS and user not in self._users
                and user not in self._users.values()):
            self._users[user] = f"user{len(self._users) + 1}"

    def _user_placeholder(self, name: str) -> str:
        """The placeholder of a home folder's user: its own, a placeholder kept as it is (a home
        folder replaced before), else ``user``."""
        if name in self._users:
            return self._users[name]
        return name if name in self._users.values() else "user"

    @staticmethod
    def _is_address(text: str) -> bool:
        try:
            ipaddress.ip_address(text)
        except ValueError:
            return False
        return True

    def _address(self, match: re.Match) -> str:
        text = match.group()
        try:
            address = ipaddress.ip_address(text)
        except ValueError:
            return text
        if _kept_address(address, text):
            return text
        if text not in self._addresses:
            number = len(self._addresses)
            if address.version == 4:
                self._addresses[text] = f"{_DOCUMENTATION_V4[number // 254 % 3]}{number % 254 + 1}"
            else:
                self._addresses[text] = f"2001:db8::{number + 1:x}"
        return self._addresses[text]

    def _private_host(self, match: re.Match) -> str:
        self.add_host(match.group())
        return self._hosts[match.group().lower()]

    def text(self, text: str) -> str:
        if self._home_pattern is not None:
            text = self._home_pattern.sub(lambda m: self._homes[m.group()], text)
        for match in _HOME.finditer(text):
            self.add_user(match["name"])
        lower = text.lower()
        for host, placeholder in sorted(self._hosts.items(), key=lambda item: -len(item[0])):
            if host in lower:
                text = re.sub(r"(?<![A-Za-z0-9])" + re.escape(host) + r"(?![A-Za-z0-9])",
                              placeholder, text, flags=re.IGNORECASE)
                lower = text.lower()
        text = _PRIVATE_HOST.sub(self._private_host, text)
        text = _HOME.sub(lambda m: f"{m['base']}/{self._user_placeholder(m['name'])}", text)
        for user, placeholder in self._users.items():
            if user in text:
                text = re.sub(r"(?<![A-Za-z0-9_])" + re.escape(user) + r"(?![A-Za-z0-9_])",
                              placeholder, text)
        if "." in text:
            text = _IPV4.sub(self._address, text)
        if "::" in text or text.count(":") >= 2:
            text = _IPV6.sub(self._address, text)
        return text

    def json(self, value, path: tuple[int, ...] = ()):
        """A copy of a JSON value with every string (keys included) anonymized; one that holds
        itself or is nested past redact.JSON_DEPTH is refused (descend_json)."""
        if isinstance(value, dict):
            path = descend_json(path, value)
            return {self.text(str(key)): self.json(item, path) for key, item in value.items()}
        if isinstance(value, list):
            path = descend_json(path, value)
            return [self.json(item, path) for item in value]
        if isinstance(value, str):
            return self.text(value)
        return value
