"""Where a study lives: an RDB (SQLite under the sweep's out_dir by default, PostgreSQL or MySQL for several
machines) or a journal file on a shared file system (ablate.sweep.journal), always with trial heartbeats, so a
trial whose worker died is failed and its row retried.
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import re
import shutil
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import optuna
from optuna.trial import FrozenTrial

from ablate.messages.redact import redact, remember
from ablate.sweep import sqlite_study
from ablate.sweep.journal import JournalStudyStorage, journal_path
from ablate.sweep.unbeaten import RDBStudyStorage

# We drive trials with ask/tell and beat the heart ourselves, which Optuna warns about; heartbeats are "experimental".
warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with Study.optimize")
warnings.filterwarnings(
    "ignore",
    message=r".*(heartbeat_interval|grace_period|RetryHeartbeatStaleTrialCallback|fail_stale_trials|JournalStorage).*experimental",
    category=optuna.exceptions.ExperimentalWarning,
)
# A trial whose worker stopped beating for GRACE_S is failed and retried; tests shorten this by environment.
HEARTBEAT_S = float(os.environ.get("ABLATE_SWEEP_HEARTBEAT", 5))
GRACE_S = 4 * HEARTBEAT_S
STORAGE_ENV = "ABLATE_SWEEP_STORAGE"  # how the URL (it may hold a password) reaches workers and trials: never argv
RUN_FROM_ENV = "ABLATE_SWEEP_RUN_FROM"  # the number of this run's first trial: retries are counted from it (plan_base)
MEMBERS_ENV = "ABLATE_SWEEP_MEMBERS"  # members.size, for workers that load the sweep file themselves; "K!": --members K
FREE_SPACE = "free space, then run the same command to continue"  # a full disk mid-study: its trials continue on a rerun
_DATABASE = re.compile(r"^(sqlite|postgresql|mysql)(\+\w+)?://")
CREATE_TRIES = 5  # opens of a new server database whose tables another process is creating at the same moment


def storage_url(default_dir: Path, configured: str | None = None, override: str | None = None) -> str:
    """The study's URL: --storage, else $ABLATE_SWEEP_STORAGE, else the sweep file's, else SQLite in `default_dir`."""
    url = override or os.environ.get(STORAGE_ENV) or configured
    if url:
        remember(url)  # from now on its password is masked in any text this process prints or saves
    if url and re.match(r"^(postgresql|mysql)", url) and "@" in url.split("://", 1)[-1].rsplit("@", 1)[0]:
        raise ValueError(  # the driver would end the password at that '@' and take the rest for the host
            f"storage {redact(url)}: its user or password holds a raw '@'; write it as %40 (percent-encoded)"
        )
    if url and _DATABASE.match(url) and ("{" in url or "}" in url):
        raise ValueError(  # Optuna fills the URL in as a template: its KeyError would quote what the braces enclose
            f"storage {redact(url)}: it holds a raw '{{' or '}}', which Optuna reads as a placeholder; write them as %7B "
            "and %7D (percent-encoded)"
        )
    if url and journal_path(url) is not None:
        return f"journal://{journal_path(url).resolve()}"  # absolute: workers and trials may start elsewhere
    if url and not _DATABASE.match(url):
        raise ValueError(
            f"storage {redact(url)!r} is neither a database URL nor a journal file; use sqlite:///path/study.db "
            "(one machine), postgresql://user@host/db (several), or journal:///shared/path/study.log (several "
            "machines on a shared file system such as NFS)"
        )
    if url:
        _check_parses(url)
    if url and sqlite_study.in_memory(url):
        raise ValueError(  # the parent would queue its trials where no worker looks, and train nothing
            f"storage {redact(url)!r}: an in-memory study cannot be shared with the sweep's worker processes; give a "
            "file: sqlite:///path/study.db"
        )
    return url or sqlite_study.sqlite_url((default_dir / "study.db").resolve())


def _check_parses(url: str) -> None:
    """Refuse a database URL SQLAlchemy cannot parse, without quoting it: with no '@' (a YAML value cut short at an
    unquoted ' #'), `user:password` reads as host and port, and SQLAlchemy's error quoted the password as the port."""
    from sqlalchemy.engine import make_url

    try:
        make_url(url)
    except Exception:
        raise ValueError(
            f"the storage URL ({url.split('://', 1)[0]}://..., not shown: it may hold a password) cannot be parsed: is its "
            "host missing, or its port not a number? In a sweep file, quote a storage value that holds ' #' (YAML ends "
            "the value there)"
        ) from None


def make_storage(url: str, read_only: bool = False) -> optuna.storages.BaseStorage:
    """The study's storage. A SQLite file is checked before anything writes to it (a damaged one is refused, naming
    it) and its full disk or damage met later is said as such (ablate.sweep.sqlite_study). `read_only` (`ablate
    status`): a storage that is there, opened creating nothing (no tables, lock file or heartbeat folder)."""
    remember(url)
    beat = {"heartbeat_interval": max(1, round(HEARTBEAT_S)), "grace_period": max(2, round(GRACE_S))}
    if journal_path(url) is not None:
        return JournalStudyStorage(journal_path(url), read_only=read_only, **beat)
    db = sqlite_study.sqlite_file(url)
    if db is None:  # a server: a connection its restart closed is replaced, not used (an error after every trial ended)
        server = {"engine_kwargs": {"pool_pre_ping": True}, **beat}
        return (
            RDBStudyStorage(url, skip_table_creation=True, **server) if read_only else _created_once(lambda: RDBStudyStorage(url, **server))
        )
    sqlite_study.check_database(db)
    sqlite_study.watch(db)
    if read_only:
        sqlite_study.check_tables(db)
        return RDBStudyStorage(url, engine_kwargs={"connect_args": {"timeout": 60}}, skip_table_creation=True, **beat)
    with sqlite_study.study_lock(db):  # the first open creates the tables: one process at a time
        return RDBStudyStorage(url, engine_kwargs={"connect_args": {"timeout": 60}}, **beat)


def _created_once(make: Callable[[], optuna.storages.RDBStorage]) -> optuna.storages.RDBStorage:
    """Open a server's storage; Optuna creates its tables and version rows on the first open, and a process that
    loses that race to another one (a duplicate key, a table that already exists) opens it again, now made."""
    import sqlalchemy.exc

    for attempt in range(1, CREATE_TRIES + 1):
        try:
            return make()
        except sqlalchemy.exc.DBAPIError as e:
            lost = isinstance(e, sqlalchemy.exc.IntegrityError) or "already exists" in str(e.orig)
            if not lost or attempt == CREATE_TRIES:
                raise
            time.sleep(random.uniform(0.1, 0.5))
    raise AssertionError("unreachable")


@dataclass
class StudyHandle:
    """An open study with the storage it was opened on, for what Optuna's Study has no public API for: a trial's
    storage id, heartbeats, and the attributes a queued trial was enqueued with."""

    study: optuna.Study
    storage: optuna.storages.BaseStorage
    url: str
    sweep_file: Path | None = None  # the sweep it runs for: its trials say to run it again to continue (trial._supervise)

    @functools.cached_property
    def study_id(self) -> int:
        return self.storage.get_study_id_from_name(self.study.study_name)

    def trial_id(self, number: int) -> int:
        return self.storage.get_trial_id_from_study_id_trial_number(self.study_id, number)

    def frozen(self, trial: optuna.Trial) -> FrozenTrial:
        """The trial as stored now (state, system and user attributes), not as this process last saw it."""
        return self.by_number(trial.number)

    def by_number(self, number: int) -> FrozenTrial:
        return self.storage.get_trial(self.trial_id(number))

    def beat(self, trial: optuna.Trial) -> None:
        self.storage.record_heartbeat(self.trial_id(trial.number))


def open_study(
    name: str,
    url: str,
    direction: str,
    sampler: optuna.samplers.BaseSampler,
    pruner: optuna.pruners.BasePruner | None = None,
    sqlite_dir: Path | None = None,
) -> StudyHandle:
    """Create or load a study; a storage that cannot be read is reported (and left untouched)."""
    import sqlalchemy.exc

    from ablate.run.quiet import quiet_libraries

    quiet_libraries()  # Optuna's "A new study created ..." lines: the sweep says what it opened in its own words

    if url.startswith("sqlite") and sqlite_dir is not None:
        sqlite_dir.mkdir(parents=True, exist_ok=True)
    if (db := sqlite_study.sqlite_file(url)) is not None and not db.parent.is_dir():  # SQLite: "unable to open"; "restore it"
        # Not made: a shared path mistyped, or its mount missing, would start a new study on this machine's own disk
        raise ValueError(
            f"cannot open the study '{name}' at {redact(url)}: its folder {db.parent} does not exist; make it, or check the path"
        )
    try:
        storage = make_storage(url)
        study = optuna.create_study(
            study_name=name, storage=storage, direction=direction, sampler=sampler, pruner=pruner, load_if_exists=True
        )
    except sqlite_study.DamagedStudy as e:
        raise sqlite_study.DamagedStudy(f"cannot open the study '{name}' at {redact(url)}: {e}") from None
    except sqlalchemy.exc.SQLAlchemyError as e:
        reason = driver_reason(e)
        if unreachable(e):  # nothing was read, so nothing can be damaged: say what to check instead
            raise ValueError(
                f"cannot open the study '{name}' at {redact(url)}: the database server could not be reached ({reason}); "
                "check its host, port and that it runs, or give the sweep another storage"
            ) from None
        raise ValueError(
            f"cannot open the study '{name}' at {redact(url)}: {reason}; the storage was left as it is "
            "(restore it from a backup, or give the sweep another out_dir or storage)"
        ) from None
    except (OSError, ValueError):  # ablate's own words (a full disk, a damaged journal line): masked where printed
        raise
    except Exception as e:  # anything else a driver or Optuna raises may quote the URL, or a piece of its password
        raise ValueError(f"cannot open the study '{name}' at {redact(url)}: {type(e).__name__}: {driver_reason(e)}") from None
    return StudyHandle(study, storage, url)


# What the drivers (psycopg 2 and 3, pymysql, mysqlclient) say when no connection was made at all.
_NO_CONNECTION = (
    "could not connect",
    "connection refused",
    "could not translate host name",
    "failed to resolve host",
    "name or service not known",
    "no route to host",
    "timeout expired",
    "connection timed out",
    "can't connect to",
    "unknown mysql server host",
)


def unreachable(e: Exception) -> bool:
    """Whether a storage error means the server was never reached (a wrong host or port, a server down), not that
    the storage refused or holds something damaged."""
    import sqlalchemy.exc

    return isinstance(e, sqlalchemy.exc.OperationalError) and any(s in _driver_text(e).lower() for s in _NO_CONNECTION)


STORAGE_LOST = "the study's database server could not be reached; what ran saved, and continues when the sweep runs again"
# What they say when a connection they had is lost (a server restarted or stopped): gone now, not refused.
_LOST_CONNECTION = ("server closed the connection", "terminating connection", "connection is closed", "lost connection")


def lost_storage(e: BaseException) -> BaseException | None:
    """The driver's error where `e` (or what caused it: Optuna wraps it) says the study's server was out of reach, or the
    connection to it lost: no trial's fault, and a rerun continues the trials. None otherwise."""
    import sqlalchemy.exc

    cause: BaseException | None = e
    for _ in range(8):  # the chain is short; a bound in case it loops
        if cause is None:
            return None
        text = _driver_text(cause).lower()
        if isinstance(cause, sqlalchemy.exc.DBAPIError) and any(s in text for s in (*_NO_CONNECTION, *_LOST_CONNECTION)):
            return cause
        cause = cause.__cause__ or cause.__context__
    return None


def driver_reason(e: Exception) -> str:
    """The first line of a database driver's error, secrets masked (ablate.messages.redact): what to print of it."""
    return redact((_driver_text(e).splitlines() or [type(e).__name__])[0])


def _driver_text(e: BaseException) -> str:
    """What the driver said: SQLAlchemy's error keeps it as `orig`."""
    return str(getattr(e, "orig", None) or e)


@contextlib.contextmanager
def claim_lock(url: str):
    """Serialise between processes on one SQLite or journal file what reads the study and then writes by what it read:
    taking a queued trial, a search's budget check and its draw, queueing the rows at a sweep's start.

    Optuna claims a WAITING trial with SELECT ... FOR UPDATE, which PostgreSQL and MySQL honour but SQLite ignores, so
    two local workers could both take the same trial. A file lock next to the database closes that race (SQLite
    studies are single-machine anyway); beside a journal, a lock file of its own (`JOURNAL.claim`; Optuna's append lock
    is taken inside), on one machine or over an NFS mount with locking. A server's study takes none: there, a row queued
    twice is a duplicate its claim drops (ablate.sweep.variants_plan).
    """
    db, journal = sqlite_study.sqlite_file(url), journal_path(url)
    if db is not None:
        with sqlite_study.study_lock(db):
            yield
    elif journal is not None:
        with sqlite_study.study_lock(journal, suffix=".claim"):
            yield
    else:
        yield


def dashboard_hint(url: str) -> str:
    """How to see the study in Optuna's dashboard, with how to install it where it is not (`pip install -e .` brings
    no dashboard; the dev extra does)."""
    command = f"optuna-dashboard {journal_path(url) or redact(url)}"
    if shutil.which("optuna-dashboard") is None:
        return f"dashboard: pip install optuna-dashboard, then {command}"
    return f"dashboard: {command}"
