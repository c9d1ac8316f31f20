"""Typed settings of a plug-in: one frozen dataclass per policy or retriever, its fields
the one source.

A plug-in declares `Settings` (a subclass of `Settings` here; a retriever's of
`RetrieverSettings`) whose fields are made by `setting(...)`: the default, the valid range
or choices, whether a request to the service may set it, how reports show it, and the
values `suture calibrate` searches. The registries, `suture policies`, `--param`,
`--retriever-param`, the service and calibrate read those fields, so a new parameter or
retriever option is one field.

A field holding another `Settings` (made by `nested(prefix)`) groups a rule that is its
own idea (scar-sentences' focused-query rule); its fields are named `PREFIX + name`
(`focused_tau`: the name reports, run files and stored manifests use) and may also be
addressed as `FIELD.name` (`--param focused.tau=0.3`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar

from suture.exceptions import ConfigurationError
from suture.numbers import real_number, whole_number

SettingsT = TypeVar("SettingsT", bound="Settings")

Kind = Literal["real", "whole", "choice", "text", "flag"]
_SPEC = "suture.setting"
_NESTED = "suture.nested"


def parse_param_value(text: str) -> Any:
    """A setting's value as a command line writes it (`--param NAME=VALUE`, `suture eval
    --param policy.NAME=VALUE`): true/false and none/null in any case, then JSON ("0.5",
    "[1, 2]", '"text"'), then a number Python reads ("inf", "01"), else the text itself."""
    lowered = text.lower()
    if lowered in {"true", "false"}:
        return lowered == "true"
    if lowered in {"none", "null"}:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


@dataclass(frozen=True, slots=True)
class Spec:
    """What a field accepts: read by the one validator (`Spec.check`) and by the surfaces."""

    kind: Kind
    #: real: [low, high) (`high_included`: [low, high]); whole: >= low (None: any)
    low: float | None = None
    high: float | None = None
    high_included: bool = False
    choices: tuple[str, ...] = ()
    #: a value to suggest in an error (`--param NAME=EXAMPLE`)
    example: Any = None
    #: None passes unchecked (the setting is off)
    optional: bool = False
    #: whether a request to the service may set it (a path is the server's to choose)
    request: bool = True
    #: why a request may not set it, and what sets it instead
    request_note: str = ""
    #: the values `suture calibrate` searches unless told (None: not calibrated)
    grid: tuple[Any, ...] | None = None
    #: what the choices mean, appended to a refused choice's message
    explain: str = ""
    #: only queries that name their document read it (calibrate searches it only when
    #: some are focused)
    focused_only: bool = False
    #: (a sibling field's name, the values of it under which this one is read): a setting
    #: nothing reads is left out of `Settings.read` (reports, run files); None: always read
    read_when: tuple[str, tuple[Any, ...]] | None = None
    #: whether reports and run files show it (`Settings.read`): False for a setting that
    #: changes how, not what (rerank's backend computes the same scores either way)
    reported: bool = True
    #: how reports show a value (None: as held): the folder rerank's model resolves to,
    #: scar's links spelled out
    report: Callable[[Any], Any] | None = None

    def check(self, owner: str, name: str, value: Any, flag: str = "--param") -> Any:
        """`value` as this field holds it, or `ConfigurationError` naming owner, field,
        value and what to use (`suture.numbers` for numbers; `flag`: the CLI option that
        sets it)."""
        if value is None and self.optional:
            return None
        if self.kind == "real":
            low = -float("inf") if self.low is None else self.low
            high = float("inf") if self.high is None else self.high
            return real_number(owner, name, value, low=low, high=high,
                               high_included=self.high_included, example=self.example,
                               flag=flag)
        if self.kind == "whole":
            minimum = None if self.low is None else int(self.low)
            return whole_number(owner, name, value, minimum=minimum, example=self.example,
                                flag=flag)
        if self.kind == "text" and not isinstance(value, str):
            if isinstance(value, int | float) and not isinstance(value, bool):
                return str(value)  # the CLI reads `--param model=5` as a number
            raise ConfigurationError(f"{owner} {name} must be text, got {value!r}")
        if self.kind == "flag" and not isinstance(value, bool):
            raise ConfigurationError(
                f"{owner} {name} must be true or false, got {value!r} "
                f"(e.g. {flag} {name}={'false' if self.example else 'true'})")
        if self.kind == "choice" and value not in self.choices:
            why = f": {self.explain}" if self.explain else ""
            raise ConfigurationError(
                f"{owner} {name} must be one of {', '.join(self.choices)}, got {value!r}{why}")
        return value


def setting(default: Any, kind: Kind, *, low: float | None = None, high: float | None = None,
            high_included: bool = False, choices: Sequence[str] = (), example: Any = None,
            optional: bool = False, request: bool = True, request_note: str = "",
            grid: Sequence[Any] | None = None, explain: str = "",
            focused_only: bool = False,
            read_when: tuple[str, Sequence[Any]] | None = None, reported: bool = True,
            report: Callable[[Any], Any] | None = None) -> Any:
    """A settings field: its default and what it accepts (see `Spec`)."""
    spec = Spec(kind, low, high, high_included, tuple(choices),
                default if example is None else example, optional, request, request_note,
                None if grid is None else tuple(grid), explain, focused_only,
                None if read_when is None else (read_when[0], tuple(read_when[1])),
                reported, report)
    return dataclasses.field(default=default, metadata={_SPEC: spec})


def nested(settings: type[Settings], prefix: str) -> Any:
    """A field grouping another `Settings` whose fields are named `prefix + name`."""
    return dataclasses.field(default_factory=settings, metadata={_NESTED: (prefix, settings)})


@dataclass(frozen=True, slots=True)
class Field:
    """One setting as the surfaces see it: its flat name, where it sits, default, spec."""

    name: str
    path: tuple[str, ...]  # attribute names from the top settings down
    default: Any
    spec: Spec

    @property
    def dotted(self) -> str:
        """`focused.tau` for a nested field (the flat `name` is `focused_tau`)."""
        return ".".join(self.path)


@dataclass(frozen=True, slots=True)
class Settings:
    """Base of every plug-in's settings (a frozen dataclass of `setting` fields; a field
    may not take the name of a method here: `fields`, `build`, `flat`, `read`, ...)."""

    _fields_cache: ClassVar[dict[type, tuple[Field, ...]]] = {}
    #: what owns these settings, what it calls one, and the CLI option that sets one
    #: (error messages)
    family: ClassVar[str] = "policy"
    noun: ClassVar[str] = "parameter"
    flag: ClassVar[str] = "--param"

    @classmethod
    def fields(cls) -> tuple[Field, ...]:
        """Every setting, nested ones flattened, in declaration order."""
        cached = Settings._fields_cache.get(cls)
        if cached is None:
            cached = tuple(_flatten(cls, (), ""))
            Settings._fields_cache[cls] = cached
        return cached

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """{flat name: default} in declaration order."""
        return {f.name: f.default for f in cls.fields()}

    @classmethod
    def grid(cls) -> dict[str, list[Any]]:
        """{flat name: values} `suture calibrate` searches (fields with a grid)."""
        return {f.name: list(f.spec.grid) for f in cls.fields() if f.spec.grid is not None}

    @classmethod
    def resolve(cls, name: str) -> Field | None:
        """The field `name` addresses: its flat name (`focused_tau`) or dotted path
        (`focused.tau`); None when there is none."""
        for item in cls.fields():
            if name in (item.name, item.dotted):
                return item
        return None

    @classmethod
    def build(cls: type[SettingsT], owner: str, params: Mapping[str, Any]) -> SettingsT:
        """These settings from keyword parameters (flat or dotted names), each checked by
        its field's `Spec`; an unknown name is refused with the list of parameters."""
        values: dict[tuple[str, ...], Any] = {}
        unknown: list[str] = []
        for name, value in params.items():
            item = cls.resolve(name)
            if item is None:
                unknown.append(name)
            else:
                values[item.path] = item.spec.check(owner, item.name, value, cls.flag)
        if unknown:
            raise ConfigurationError(
                f"{cls.family} {owner!r} has no {cls.noun} "
                f"{', '.join(map(repr, sorted(unknown)))}; its {cls.noun}s (with defaults) "
                f"are: {describe(cls.defaults())}")
        return _assemble(cls, (), values)

    @classmethod
    def given(cls: type[SettingsT], owner: str, settings: SettingsT | None,
              params: Mapping[str, Any]) -> SettingsT:
        """What a plug-in's constructor was handed: `settings` whole, or these settings
        built from keyword `params` (`build`), never both."""
        if settings is None:
            return cls.build(owner, params)
        if params:
            raise ConfigurationError(
                f"{cls.family} {owner!r} takes its settings whole or as {cls.noun}s, not both")
        return settings

    def verify(self, owner: str) -> None:
        """Check every value held by its field's `Spec` (settings made directly rather
        than through `build`, as BM25's are by the stores)."""
        for item, value in zip(self.fields(), self.flat().values(), strict=True):
            item.spec.check(owner, item.name, value, self.flag)

    def flat(self) -> dict[str, Any]:
        """{flat name: value} of every setting (what manifests hold)."""
        out: dict[str, Any] = {}
        for item in self.fields():
            value: Any = self
            for part in item.path:
                value = getattr(value, part)
            out[item.name] = value
        return out

    def read(self) -> dict[str, Any]:
        """`flat` less the settings nothing reads as set (`Spec.read_when`) or reports do
        not show (`Spec.reported`), each as reports show it (`Spec.report`): what decides
        the output, for reports and run files."""
        values = self.flat()
        out: dict[str, Any] = {}
        for item in self.fields():
            spec = item.spec
            if not spec.reported or (spec.read_when is not None
                                     and values[spec.read_when[0]] not in spec.read_when[1]):
                continue
            value = values[item.name]
            out[item.name] = value if spec.report is None else spec.report(value)
        return out


@dataclass(frozen=True, slots=True)
class RetrieverSettings(Settings):
    """Base of every first-stage retriever's settings: its options (`--retriever-param`,
    a request's `retriever_options`)."""

    family: ClassVar[str] = "retriever"
    noun: ClassVar[str] = "option"
    flag: ClassVar[str] = "--retriever-param"


def describe(defaults: Mapping[str, Any]) -> str:
    """"lam=1.0, tau=0.3, ..." ("(none)" for no settings)."""
    return ", ".join(f"{key}={value!r}" for key, value in defaults.items()) or "(none)"


def _flatten(cls: type[Settings], path: tuple[str, ...], prefix: str) -> list[Field]:
    out: list[Field] = []
    for item in dataclasses.fields(cls):
        if _NESTED in item.metadata:
            inner_prefix, inner = item.metadata[_NESTED]
            out += _flatten(inner, (*path, item.name), prefix + inner_prefix)
        elif _SPEC in item.metadata:
            spec: Spec = item.metadata[_SPEC]
            if spec.read_when is not None:  # the sibling by its flat name
                spec = dataclasses.replace(
                    spec, read_when=(prefix + spec.read_when[0], spec.read_when[1]))
            out.append(Field(prefix + item.name, (*path, item.name), item.default, spec))
    return out


def _assemble(cls: type[SettingsT], path: tuple[str, ...],
              values: Mapping[tuple[str, ...], Any]) -> SettingsT:
    """`cls` with the given leaf values (others at their defaults), nested ones built too."""
    kwargs: dict[str, Any] = {}
    for item in dataclasses.fields(cls):
        where = (*path, item.name)
        if _NESTED in item.metadata:
            if any(key[: len(where)] == where for key in values):
                kwargs[item.name] = _assemble(item.metadata[_NESTED][1], where, values)
        elif where in values:
            kwargs[item.name] = values[where]
    return cls(**kwargs)


__all__ = ["Field", "RetrieverSettings", "Settings", "Spec", "describe", "nested", "setting"]
