"""One error hierarchy; each error knows the exit status the CLI must return."""


class CigriError(Exception):
    """An expected failure: shown as one line on stderr, never as a traceback."""

    exit_code = 1


class InputError(CigriError):
    """Bad usage or bad input (JDL, parameters, configuration): exit status 2."""

    exit_code = 2


class ConfigError(InputError):
    """A configuration key is unknown or has a bad value."""


class NotFound(CigriError):
    """The campaign, job or cluster named does not exist."""


class Refused(CigriError):
    """The request is valid but cannot be done in the current state."""


class Busy(CigriError):
    """Another process holds the lock this command needs (e.g. a running cycle)."""


class BackendError(CigriError):
    """A cluster did not answer as expected; the cycle turns it into an event named ``code``."""

    code = "CLUSTER_UNREACHABLE"


class ClusterTimeout(BackendError):
    code = "CLUSTER_TIMEOUT"


class ClusterAuthFailure(BackendError):
    code = "CLUSTER_AUTH_FAILURE"


class ClusterBadAnswer(BackendError):
    """The cluster answered, but not in a way its dialect can read."""

    code = "CLUSTER_BAD_ANSWER"


class SubmitLimitReached(BackendError):
    """The cluster takes no more jobs from cigri's account for now: a site's cap on the jobs one
    account may have queued or running (Slurm's ``MaxSubmitJobs``). The same jobs are welcome
    once some of cigri's end there, so nothing fails (:mod:`cigri.runner`). ``maybe_job``: the
    cluster's words also cover a job it can never run (slurmrestd's one error for both)."""

    code = "SUBMIT_LIMIT"

    def __init__(self, message: str, *, maybe_job: bool = False) -> None:
        super().__init__(message)
        self.maybe_job = maybe_job


class SubmissionRefused(BackendError):
    """The cluster cannot run the jobs as described (resources it cannot express, a refused
    partition...): resending the same batch will fail again until the campaign changes."""

    code = "SUBMISSION_ERROR"


def shown(value: object, width: int = 60) -> str:
    """A value echoed in an error, cut to ``width`` characters: a 100,000-character name or a
    300-digit number must not fill the terminal."""
    text = repr(value)
    return text if len(text) <= width else f"{text[:width]}… ({len(text)} characters)"
