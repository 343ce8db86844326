"""Built-in workloads: ``get(name, **options) -> (IRModule, params)`` and ``names()``.

Every model takes ``small=True`` (a configuration with the full structure and small sizes,
for fast tests), ``seed`` (the parameters are seeded random values), ``batch_size`` and
``dtype``; an option a model does not take is refused, before anything is built, with the list
of those it takes (``check_options``). See each builder for its other options
(``image_shape``, ``num_layers``, ``hidden``, ``heads``, ``seq_len``, ``steps``, ...).
Parameter names follow TVM's ``relay.testing`` workloads where TVM has the model.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from ..errors import OptionError, UnknownNameError
from ..ir.module import IRModule
from ..validate import call_options
from . import examples
from .bert import bert
from .dcgan import dcgan
from .densenet import densenet
from .inception_v3 import inception_v3
from .lstm import lstm
from .mobilenet import mobilenet
from .nasrnn import nasrnn
from .resnet import resnet
from .sima import sima
from .squeezenet import squeezenet
from .vgg import vgg

__all__ = ["get", "check_options", "names", "register", "example_inputs", "MODELS"]

_BUILDERS: dict[str, Callable[..., tuple[IRModule, dict]]] = {}


def register(name: str, builder: Callable[..., tuple[IRModule, dict]]) -> None:
    """Make a workload available under ``name`` (kebab-case)."""
    _BUILDERS[name] = builder


def names() -> list[str]:
    """The names of the built-in workloads."""
    return sorted(_BUILDERS)


def check_options(name: str, **options) -> None:
    """Refuse, before building anything, a model name or an option the model does not take
    (the error lists the models, or the options the model accepts)."""
    builder = _lookup(name)
    fixed = getattr(builder, "fixed", {})
    clash = sorted(set(options) & set(fixed))
    if clash:
        given = ", ".join(f"{k}={fixed[k]!r}" for k in clash)
        raise OptionError(f"model {name!r} fixes {given}; choose another model name instead")
    call_options(f"model {name!r}", builder, options, fixed)


def get(name: str, **options) -> tuple[IRModule, dict]:
    """Build a workload: the module and a dict of seeded random parameter values."""
    check_options(name, **options)
    return _lookup(name)(**options)


def _lookup(name: str) -> Callable[..., tuple[IRModule, dict]]:
    try:
        return _BUILDERS[name]
    except KeyError:
        raise UnknownNameError(f"unknown model {name!r}; known: {', '.join(names())}") from None


def example_inputs(mod: IRModule, params: dict, seed: int = 0, entry: str = "main") -> dict:
    """Seeded random values for the entry function's inputs that are not parameters, each from
    the domain its uses want (``relaygraph.eval.inputs``)."""
    from ..eval.inputs import random_inputs

    names = [p.name_hint for p in mod[entry].params if p.name_hint not in params]
    values = random_inputs(mod, seed, entry=entry, skip=set(params))
    return dict(zip(names, values, strict=True))


register("residual-mlp", examples.residual_mlp)
register("diamond-chain", examples.diamond_chain)

def _variant(builder: Callable, **fixed) -> Callable:
    """``builder`` with options fixed by the model's name (``vgg-16`` fixes ``num_layers``)."""

    @functools.wraps(builder)
    def build(**options):
        return builder(**fixed, **options)

    build.fixed = fixed  # checked by check_options, which names the model
    return build


# The real models (each has a small=True configuration).
MODELS = {
    "resnet-18": _variant(resnet, num_layers=18),
    "resnet-34": _variant(resnet, num_layers=34),
    "resnet-50": _variant(resnet, num_layers=50),
    "mobilenet": mobilenet,
    "vgg-11": _variant(vgg, num_layers=11),
    "vgg-16": _variant(vgg, num_layers=16),
    "vgg-19": _variant(vgg, num_layers=19),
    "squeezenet-1.0": _variant(squeezenet, version="1.0"),
    "squeezenet-1.1": _variant(squeezenet, version="1.1"),
    "inception-v3": inception_v3,
    "densenet-121": _variant(densenet, densenet_size=121),
    "dcgan": dcgan,
    "lstm": lstm,
    "bert": bert,
    "nasrnn": nasrnn,
    "vit-sima": sima,
}
for _name, _builder in MODELS.items():
    register(_name, _builder)
