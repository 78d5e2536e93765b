"""A throw-away MIT Kerberos KDC for the GSSAPI tests. [io: a child process and files]

No Kafka cluster here speaks Kerberos, and none needs to: the SASL front door
(:mod:`support.sasl_front_door`) accepts GSSAPI logins itself with a service keytab. What it and the
clients need is a real KDC, and MIT's is a Debian package (``krb5-kdc``, ``krb5-admin-server``,
``krb5-user``; ``scripts/bootstrap.sh --test`` installs them). :class:`TestKdc` makes a realm
(default ``KAFLUX.TEST``) in a temporary directory: its own ``krb5.conf`` and ``kdc.conf``, a
database made with ``kdb5_util create -s``, principals and keytabs made with ``kadmin.local``, and
``krb5kdc -n`` (foreground) as a child process on a free loopback port, stopped by PID.

The client side of Kerberos reads its configuration from the environment (``KRB5_CONFIG``), so
:meth:`TestKdc.environment` lists what a process must set to use this realm and nothing else: the
realm's ``krb5.conf``, a default credential cache in the work directory (empty until someone
``kinit``\\ s into it), no default client keytab, and a replay cache directory of its own.
``krb5.conf`` turns off DNS (``rdns = false``, ``dns_canonicalize_hostname = false``) so that the
service principal of a broker at ``localhost`` or ``127.0.0.1`` is ``kafka/<that host>@REALM``, as
written, and forces TCP to the KDC. ``clock_offset`` runs the KDC with libfaketime preloaded
(Debian's ``faketime``), for clock-skew failures; preloaded rather than through the ``faketime``
program, which forks and would leave krb5kdc behind when it is stopped.

Typical use::

    with TestKdc() as kdc:
        kdc.add_principal("kafka/localhost", keytab=kdc.path("kafka.keytab"))
        keytab = kdc.add_principal("alice", keytab=kdc.path("alice.keytab"))
        os.environ.update(kdc.environment())
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Self

from kaflux.devbrokers.brokers import (
    _die_with_parent_prefix,
)
from kaflux.devbrokers.brokers import (
    free_port as _free_port,
)

from support.service_process import ServiceProcess

__all__ = ["KdcStartError", "KdcUnavailableError", "TestKdc", "kerberos_tools"]

_HOST = "127.0.0.1"
_TOOLS = ("krb5kdc", "kdb5_util", "kadmin.local", "kinit", "klist")
#: where Debian installs the KDC's programs (not on a non-root PATH)
_SBIN = ("/usr/sbin", "/sbin", "/usr/local/sbin")
_MASTER_PASSWORD = "kaflux-kdc-master"
_PORT_RACE_ATTEMPTS = 5


class KdcUnavailableError(RuntimeError):
    """MIT Kerberos' KDC tools are not installed (scripts/bootstrap.sh --test installs them)."""


class KdcStartError(RuntimeError):
    """A KDC tool failed, or krb5kdc did not come up; the message ends with its output or log."""


def kerberos_tools() -> dict[str, str]:
    """The paths of krb5kdc, kdb5_util, kadmin.local, kinit and klist. Raises KdcUnavailableError."""
    search = os.pathsep.join([os.environ.get("PATH", ""), *_SBIN])
    found: dict[str, str] = {}
    for tool in _TOOLS:
        path = shutil.which(tool, path=search)
        if path is None:
            raise KdcUnavailableError(
                f"{tool} is not installed: apt-get install krb5-kdc krb5-admin-server krb5-user "
                "(scripts/bootstrap.sh --test does it)"
            )
        found[tool] = path
    return found


def libfaketime() -> str:
    """The path of libfaketime (Debian's faketime package). Raises KdcUnavailableError."""
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1")) + sorted(
        glob.glob("/usr/lib/faketime/libfaketime.so.1")
    )
    if not found:
        raise KdcUnavailableError(
            "libfaketime is not installed: apt-get install faketime (bootstrap.sh --test does it)"
        )
    return found[0]


class TestKdc(ServiceProcess):
    """An MIT KDC for ``realm`` on 127.0.0.1 (see the module docstring)."""

    __test__ = False  # not a pytest class despite its name

    def __init__(
        self,
        realm: str = "KAFLUX.TEST",
        *,
        workdir: str | os.PathLike[str] | None = None,
        clock_offset: str | None = None,
    ) -> None:
        self.realm = realm
        self.tools = kerberos_tools()
        #: run krb5kdc with libfaketime and this offset (e.g. "-1h"): a KDC whose clock is wrong
        self.clock_offset = clock_offset
        if clock_offset is not None:
            self.tools["libfaketime"] = libfaketime()
        super().__init__(workdir, prefix="kaflux-kdc-", log_name="krb5kdc.log")
        self.krb5_conf = self.workdir / "krb5.conf"
        self.kdc_conf = self.workdir / "kdc.conf"
        self.default_ccache = self.workdir / "default.ccache"
        self._port: int | None = None
        self._database_made = False

    # --- state ---

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the KDC has not been started yet, so it has no port")
        return self._port

    def path(self, name: str) -> Path:
        """A file name in the KDC's work directory (for keytabs and credential caches)."""
        return self.workdir / name

    def principal(self, name: str) -> str:
        """``name`` with this realm appended (``alice`` -> ``alice@KAFLUX.TEST``)."""
        return name if "@" in name else f"{name}@{self.realm}"

    def environment(self) -> dict[str, str]:
        """The variables a Kerberos client or acceptor needs to use this realm, and only it."""
        return {
            "KRB5_CONFIG": str(self.krb5_conf),
            "KRB5_KDC_PROFILE": str(self.kdc_conf),
            "KRB5CCNAME": f"FILE:{self.default_ccache}",
            # MIT's default client keytab would let any process get tickets by itself
            "KRB5_CLIENT_KTNAME": f"FILE:{self.workdir / 'no-default-client.keytab'}",
            "KRB5_KTNAME": f"FILE:{self.workdir / 'no-default.keytab'}",
            "KRB5RCACHEDIR": str(self.workdir),
        }

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.is_alive() else "stopped"
        return f"<TestKdc {self.realm} {_HOST}:{self._port or '?'} {state}>"

    # --- life cycle ---

    def start(self, timeout: float = 30.0) -> Self:
        """Create the realm's database (once) and start krb5kdc; returns once it accepts TCP."""
        with self._lock:
            if self.is_alive():
                return self
            deadline = time.monotonic() + timeout
            for attempt in range(1, _PORT_RACE_ATTEMPTS + 1):
                self._port = _free_port()
                self._write_configuration(self._port)
                if not self._database_made:
                    self._run("kdb5_util", "create", "-s", "-r", self.realm, "-P", _MASTER_PASSWORD, "-W")
                    self._database_made = True
                self._launch()
                failure = self._wait_ready(deadline)
                if failure is None:
                    self._started()
                    return self
                self.stop()
                if "Address already in use" not in self.log_tail() or attempt == _PORT_RACE_ATTEMPTS:
                    raise KdcStartError(
                        f"krb5kdc did not start: {failure}; its log ends with:\n{self.log_tail()}"
                    )
            raise AssertionError("unreachable")

    # --- principals, keytabs, tickets ---

    def add_principal(
        self,
        name: str,
        *,
        keytab: Path | None = None,
        password: str | None = None,
        requires_preauth: bool = False,
    ) -> Path | None:
        """Create ``name`` (random key, or ``password``); with ``keytab``, export its keys there.
        ``requires_preauth``: the client must prove its key with a timestamp (which the KDC
        checks against its clock) before it gets a ticket.

        Returns the keytab's path (None without one).
        """
        principal = self.principal(name)
        key = "-randkey" if password is None else f"-pw {password}"
        flags = " +requires_preauth" if requires_preauth else ""
        self._run("kadmin.local", "-q", f"addprinc {key}{flags} {principal}")
        if keytab is None:
            return None
        self.export_keytab(keytab, name)
        return keytab

    def export_keytab(self, keytab: Path, *names: str) -> Path:
        """Add the current keys of ``names`` to ``keytab`` (without changing them: ``-norandkey``)."""
        principals = " ".join(self.principal(n) for n in names)
        self._run("kadmin.local", "-q", f"ktadd -norandkey -k {keytab} {principals}")
        return keytab

    def set_max_life(self, name: str, seconds: int) -> None:
        """Limit the tickets of ``name`` to ``seconds`` (``modprinc -maxlife``)."""
        self._run("kadmin.local", "-q", f'modprinc -maxlife "{seconds} seconds" {self.principal(name)}')

    def delete_principal(self, name: str) -> None:
        self._run("kadmin.local", "-q", f"delprinc -force {self.principal(name)}")

    def kinit(self, name: str, keytab: Path, ccache: Path) -> Path:
        """``kinit -k -t keytab -c ccache name``: a credential cache with a TGT for ``name``."""
        self._run("kinit", "-k", "-t", str(keytab), "-c", f"FILE:{ccache}", self.principal(name))
        return ccache

    def klist(self, ccache: Path) -> str:
        """``klist -c ccache``'s output: the principals it holds tickets for."""
        return self._run("klist", "-c", f"FILE:{ccache}")

    def klist_keytab(self, keytab: Path) -> str:
        """``klist -k -t keytab``'s output: the principals it holds keys of."""
        return self._run("klist", "-k", "-t", str(keytab))

    # --- internals ---

    def _write_configuration(self, port: int) -> None:
        realm, work = self.realm, self.workdir
        self.krb5_conf.write_text(
            "[libdefaults]\n"
            f"  default_realm = {realm}\n"
            "  dns_lookup_realm = false\n"
            "  dns_lookup_kdc = false\n"
            "  rdns = false\n"
            "  dns_canonicalize_hostname = false\n"
            "  udp_preference_limit = 1\n"
            "  ticket_lifetime = 1h\n"
            "  forwardable = false\n"
            f"  default_ccache_name = FILE:{self.default_ccache}\n"
            "[realms]\n"
            f"  {realm} = {{\n"
            f"    kdc = {_HOST}:{port}\n"
            "  }\n"
            "[domain_realm]\n"
            f"  localhost = {realm}\n"
            f"  {_HOST} = {realm}\n"
        )
        self.kdc_conf.write_text(
            "[kdcdefaults]\n"
            f"  kdc_listen = {_HOST}:{port}\n"
            f"  kdc_tcp_listen = {_HOST}:{port}\n"
            "[realms]\n"
            f"  {realm} = {{\n"
            f"    database_name = {work / 'principal'}\n"
            f"    key_stash_file = {work / 'stash'}\n"
            f"    acl_file = {work / 'kadm5.acl'}\n"
            f"    kdc_listen = {_HOST}:{port}\n"
            f"    kdc_tcp_listen = {_HOST}:{port}\n"
            "    max_life = 1h\n"
            "    supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal\n"
            "  }\n"
            "[logging]\n"
            f"  kdc = FILE:{self.log_path}\n"
        )
        (work / "kadm5.acl").write_text("")

    def _env(self) -> dict[str, str]:
        return {**os.environ, **self.environment()}

    def _run(self, tool: str, *args: str) -> str:
        command = [self.tools[tool], *args]
        try:
            done = subprocess.run(
                command, env=self._env(), capture_output=True, text=True, timeout=30, check=False
            )
        except subprocess.TimeoutExpired:
            raise KdcStartError(f"{' '.join(command)} did not finish within 30 s") from None
        output = (done.stdout + done.stderr).strip()
        if done.returncode != 0 or (tool == "kadmin.local" and _kadmin_failed(output)):
            raise KdcStartError(f"{' '.join(command)} failed (exit {done.returncode}):\n{output}")
        return output

    def _launch(self) -> None:
        env = self._env()
        if self.clock_offset is not None:  # krb5kdc itself, its clock shifted: stopped by its own PID
            env.update(
                LD_PRELOAD=self.tools["libfaketime"], FAKETIME=self.clock_offset, FAKETIME_NO_CACHE="1"
            )
        self._proc = subprocess.Popen(
            [*_die_with_parent_prefix(), self.tools["krb5kdc"], "-n"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=self.workdir,
            start_new_session=True,
        )

    def _wait_ready(self, deadline: float) -> str | None:
        proc = self._proc
        assert proc is not None
        while True:
            code = proc.poll()
            if code is not None:
                return f"krb5kdc exited with code {code}"
            with contextlib.suppress(OSError), socket.create_connection((_HOST, self.port), timeout=1.0):
                return None
            if time.monotonic() >= deadline:
                return "it did not accept TCP connections before the deadline"
            time.sleep(0.02)


def _kadmin_failed(output: str) -> bool:
    """kadmin.local exits 0 even when its query fails: look for its error lines."""
    return any(marker in output for marker in (" while ", "does not exist", "Unknown request"))
