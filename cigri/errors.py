"""One error hierarchy; each error knows the exit status the CLI must return and the HTTP
status the server answers with (the client turns that status back into the same error)."""


class CigriError(Exception):
    """An expected failure: shown as one line on stderr, never as a traceback. ``field`` names
    the input it is about, when there is one (the API's ``{"error": ..., "field": ...}``)."""

    exit_code = 1
    http_status = 500

    def __init__(self, message: str = "", *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class InputError(CigriError):
    """Bad usage or bad input (JDL, parameters, configuration): exit status 2."""

    exit_code = 2
    http_status = 400


class TooLarge(InputError):
    """The input is bigger than a limit allows (a parameter upload, a request body)."""

    http_status = 413


class ConfigError(InputError):
    """A configuration key is unknown or has a bad value."""


class NotFound(CigriError):
    """The campaign, job or cluster named does not exist, or is not the caller's to see: the
    answer is the same, so that ids leak nothing about other users' objects."""

    http_status = 404


class Refused(CigriError):
    """The request is valid but cannot be done now: the object is not in a state that allows
    it (a campaign already cancelled, a job not on its cluster yet...)."""

    http_status = 409


class Forbidden(Refused):
    """The caller may not do this at all (an admin's operation)."""

    http_status = 403


class Unauthenticated(CigriError):
    """The server does not know who is calling: no credential, or one expired or revoked."""

    http_status = 401


class LimitExceeded(Refused):
    """A per-user limit is reached (pending tasks, stored parameters, requests per minute);
    ``retry_after``: seconds after which the same request may succeed, when that is known."""

    http_status = 429

    def __init__(self, message: str, *, retry_after: float | None = None, field: str | None = None) -> None:
        super().__init__(message, field=field)
        self.retry_after = retry_after


class Unavailable(CigriError):
    """The server cannot be reached, or cannot serve the request now."""

    http_status = 503


class Busy(CigriError):
    """Another process holds the lock this command needs (e.g. a running cycle)."""

    http_status = 503


class Fenced(CigriError):
    """This process lost the lead on the cycles (its lease expired, another took over): the
    write it tried is refused, and nothing of its transaction is kept."""


class BackendError(CigriError):
    """A cluster did not answer as expected; the cycle turns it into an event named ``code``."""

    code = "CLUSTER_UNREACHABLE"
    http_status = 502


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
