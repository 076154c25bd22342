"""Where the `grader` client finds its server and token: options, then GRADER_* variables, then a TOML file.

The file is `$GRADER_CONFIG`, else `$XDG_CONFIG_HOME/transformer-grader/config.toml`
(`~/.config/transformer-grader/config.toml`), with top-level keys:

    server = "https://grader.example.edu"
    token = "gr_..."
    retries = 4        # extra attempts after a connection error or a 502/503/504
    timeout = 60       # seconds to wait for one answer
"""
import os
import stat
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_SERVER = "http://127.0.0.1:5000"
ENV = {"server": "GRADER_SERVER", "token": "GRADER_TOKEN", "retries": "GRADER_RETRIES", "timeout": "GRADER_TIMEOUT"}
DEFAULTS = {"server": DEFAULT_SERVER, "token": None, "retries": 4, "timeout": 60.0}
KINDS = {"server": str, "token": str, "retries": int, "timeout": float}


class ConfigError(Exception):
    """A setting that cannot be used; the message is one line naming where it came from."""


@dataclass
class Settings:
    server: str = DEFAULT_SERVER
    token: str | None = None
    retries: int = 4
    timeout: float = 60.0
    sources: dict = field(default_factory=dict)  # key -> "option", "environment GRADER_X", "config file P", "default"
    warnings: list = field(default_factory=list)

    def given(self, key: str) -> bool:
        """Whether the user set this key anywhere (not the built-in default)."""
        return self.sources.get(key, "default") != "default"


def config_path(env=None) -> Path:
    env = os.environ if env is None else env
    if env.get("GRADER_CONFIG"):
        return Path(env["GRADER_CONFIG"]).expanduser()
    base = Path(env.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "transformer-grader" / "config.toml"


def read_file(path: Path) -> tuple[dict, list]:
    """The file's settings (empty when it does not exist) and warnings about it."""
    if not path.is_file():
        return {}, []
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {path}: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"config file {path}: {exc.strerror}") from None
    warnings = [f"config file {path}: unknown key {k!r} ignored (known: {', '.join(KINDS)})"
                for k in data if k not in KINDS]
    if "token" in data and path.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        warnings.append(f"config file {path} holds a token and others may read it; chmod 600 {path}")
    return {k: v for k, v in data.items() if k in KINDS}, warnings


def convert(key: str, value, where: str):
    """value as KINDS[key], or a ConfigError naming where it came from."""
    kind = KINDS[key]
    if isinstance(value, bool) or (kind is str and not isinstance(value, str)):
        raise ConfigError(f"{where}: {key} must be a {'string' if kind is str else 'number'}, not {value!r}")
    try:
        value = kind(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: {key} must be a{'n integer' if kind is int else ' number'}, not {value!r}") from None
    if key in ("retries", "timeout") and value < 0:
        raise ConfigError(f"{where}: {key} must not be negative")
    if key == "server":
        value = normalise_server(value, where)
    if key == "token":
        value = value.strip() or None
    return value


def normalise_server(url: str, where: str = "server") -> str:
    """'host:5000' -> 'http://host:5000'; no trailing slash; only http(s)."""
    url = url.strip().rstrip("/")
    if "://" not in url:
        url = "http://" + url
    scheme, _, rest = url.partition("://")
    if scheme.lower() not in ("http", "https") or not rest:
        raise ConfigError(f"{where}: the server must be an http:// or https:// URL, not {url!r}")
    return url


def resolve(server=None, token=None, retries=None, timeout=None, env=None, path: Path | None = None) -> Settings:
    """Each setting from the first place that has it: the options given here, the environment, the file, defaults."""
    env = os.environ if env is None else env
    path = path or config_path(env)
    from_file, warnings = read_file(path)
    options = {"server": server, "token": token, "retries": retries, "timeout": timeout}
    settings = Settings(warnings=warnings)
    for key in KINDS:
        if options[key] is not None:
            value, where = options[key], "option"
        elif env.get(ENV[key]):
            value, where = env[ENV[key]], f"environment {ENV[key]}"
        elif key in from_file:
            value, where = from_file[key], f"config file {path}"
        else:
            value, where = DEFAULTS[key], "default"
        setattr(settings, key, convert(key, value, where) if value is not None else None)
        settings.sources[key] = where
    return settings


def write_setting(key: str, value, path: Path | None = None) -> Path:
    """Set one key in the config file (created 0600, as it may hold a token); other keys are kept."""
    if key not in KINDS:
        raise ConfigError(f"unknown setting {key!r}; known: {', '.join(KINDS)}")
    path = path or config_path()
    current, _ = read_file(path)
    current[key] = convert(key, value, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"{k} = {toml_value(v)}" for k, v in current.items() if v is not None]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write("# transformer-grader client settings (grader config set KEY VALUE)\n" + "\n".join(lines) + "\n")
    os.chmod(path, 0o600)
    return path


def toml_value(value) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


def masked(token: str | None) -> str:
    """A token as `config show` prints it: enough to tell two apart, never the secret."""
    if not token:
        return "(none)"
    return token[:5] + "…" + token[-4:] if len(token) > 12 else "…"
