"""One training step of a model counted with torch's own tools, without a GPU: the card.

The step (forward, a scalar loss, backward) runs on the meta device by default (no memory, no
arithmetic), through ``torch.func.functional_call`` on meta copies of the parameters, so the
caller's module is neither changed nor copied. What is counted:

- FLOPs: ``torch.utils.flop_counter.FlopCounterMode`` (forward, and forward + backward); its
  formula for a convolution's weight gradient ignores groups (a depthwise convolution's counted
  as a dense one, 27x too many FLOPs for MobileNetV3's step), so that one term is divided by the
  groups, with torch's own formula for the rest;
- operators dispatched in the step (a ``TorchDispatchMode`` that counts calls): a proxy for the
  GPU kernels launched, which bounds the utilisation of a small model;
- activation memory: the tensors autograd saves for the backward pass
  (``torch.autograd.graph.saved_tensors_hooks``), each storage once, parameters left out, plus
  the output (a loss such as cross-entropy keeps a tensor of its size);
- parameters, their gradients and the optimizer's state (per-parameter buffers of the named
  optimizer: none for plain SGD, one for momentum SGD / RMSprop / Adagrad, two for Adam(W)/LAMB);
- layers by kind from a walk over the leaf modules.

With ``amp`` the forward runs in the AMP dtype (activations counted at its size) while parameters,
gradients and optimizer state stay float32, as under ``torch.autocast``; ``dtype`` float16 /
bfloat16 without ``amp`` is a model trained wholly in that dtype.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from horus_core.describe._torch import torch
from horus_core.modelcard import DTYPES, LAYER_KINDS, ModelCard, check_card

OPTIMIZER_STATES = {"sgd": 0, "sgd-momentum": 1, "rmsprop": 1, "adagrad": 1, "adam": 2, "adamw": 2, "lamb": 2}
DEFAULT_OPTIMIZER = "adam"


class DescribeError(ValueError):
    """The model could not be described as asked (bad input shape, no trainable output, ...)."""


def describe(
    module: Any,
    example_input: Any,
    *,
    model: str = "",
    batch: int | None = None,
    optimizer: str = DEFAULT_OPTIMIZER,
    dtype: str = "float32",
    amp: bool = False,
    device: str = "auto",
) -> ModelCard:
    """The card of training ``module`` on ``example_input`` (a tensor or a tuple of tensors whose
    first dimension is the batch) for one step. ``device``: "meta", "cpu", or "auto" (default:
    meta, and the CPU where the model calls something meta tensors cannot answer, such as
    ``Tensor.item()``)."""
    t = torch()
    if optimizer not in OPTIMIZER_STATES:
        raise DescribeError(f"unknown optimizer {optimizer!r}; one of {', '.join(OPTIMIZER_STATES)}")
    if dtype not in DTYPES:
        raise DescribeError(f"unknown dtype {dtype!r}; one of {', '.join(DTYPES)}")
    inputs = example_input if isinstance(example_input, tuple) else (example_input,)
    if not inputs or not isinstance(inputs[0], t.Tensor) or inputs[0].dim() < 1:
        raise DescribeError("the example input must be a tensor (or tuple of tensors) with a batch dimension")
    compute = getattr(t, dtype) if (amp or dtype != "float32") else t.float32
    devices = ("meta", "cpu") if device == "auto" else (device,)
    for i, where in enumerate(devices):
        try:
            counted = _run_step(
                module, _state(module, where, compute), tuple(_moved(x, where, compute) for x in inputs)
            )
            device = where
            break
        except DescribeError:
            if i == len(devices) - 1:
                raise
    param_size = 2 if (dtype != "float32" and not amp) else 4
    n_params = sum(int(p.numel()) for p in module.parameters())
    trainable = sum(int(p.numel()) for p in module.parameters() if p.requires_grad)
    card = ModelCard(
        model=model or type(module).__name__,
        batch=batch if batch is not None else int(inputs[0].shape[0]),
        input_shape=tuple(int(d) for d in inputs[0].shape[1:]) or (1,),
        flops_forward=float(counted["forward"]),
        flops_step=float(counted["step"]),
        params=n_params,
        param_bytes=n_params * param_size,
        grad_bytes=trainable * param_size,
        optimizer_bytes=trainable * param_size * OPTIMIZER_STATES[optimizer],
        activation_bytes=int(counted["saved"]),
        layers=layer_counts(module),
        ops_step=counted["ops"],
        dtype=dtype,
        amp=amp,
        optimizer=optimizer,
        described_with=f"torch {t.__version__.split('+')[0]} on {device}",
    )
    return check_card(card)


def _state(module: Any, device: str, compute: Any) -> dict[str, Any]:
    """Copies of the parameters (leaves, as trainable as the originals) and buffers on ``device``."""
    t = torch()
    out: dict[str, Any] = {}
    for name, p in module.named_parameters():
        dt = compute if p.is_floating_point() else p.dtype
        out[name] = t.zeros(p.shape, dtype=dt, device=device).requires_grad_(p.requires_grad)
    for name, b in module.named_buffers():
        dt = compute if b.is_floating_point() else b.dtype
        out[name] = t.zeros(b.shape, dtype=dt, device=device)
    return out


def _moved(x: Any, device: str, compute: Any) -> Any:
    t = torch()
    if not isinstance(x, t.Tensor):
        return x
    dt = compute if x.is_floating_point() else x.dtype
    return t.zeros(x.shape, dtype=dt, device=device)


def _run_step(module: Any, state: dict[str, Any], args: tuple[Any, ...]) -> dict[str, int]:
    t = torch()
    from torch.func import functional_call
    from torch.utils.flop_counter import FlopCounterMode

    params = {p.untyped_storage()._cdata for p in state.values()}
    saved: dict[int, int] = {}

    def pack(x: Any) -> Any:
        storage = x.untyped_storage()
        key = storage._cdata
        if key not in params:
            saved[key] = int(storage.nbytes())
        return x

    ops = _OpCounter()
    was_training = module.training
    module.train()
    try:
        with FlopCounterMode(display=False, custom_mapping=_corrected()) as flops, ops:
            with t.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
                out = functional_call(module, state, args)
            forward = flops.get_total_flops()
            for x in _tensors(out):
                storage = x.untyped_storage()
                saved.setdefault(storage._cdata, int(storage.nbytes()))
            loss = _scalar(out)
            loss.backward()
            step = flops.get_total_flops()
    except (RuntimeError, NotImplementedError, TypeError) as exc:
        raise DescribeError(f"the training step failed: {' '.join(str(exc).split())[:400]}") from exc
    finally:
        module.train(was_training)
    return {"forward": forward, "step": step, "saved": sum(saved.values()), "ops": ops.count}


def _corrected() -> dict[Any, Any]:
    """torch's convolution-backward formula with the weight gradient's FLOPs divided by groups."""
    from torch.utils import flop_counter

    raw = flop_counter.conv_backward_flop.__wrapped__

    def conv_backward(*args: Any, **kwargs: Any) -> int:
        count: int = raw(*args, **kwargs)
        groups, mask = args[9], args[10]
        if groups > 1 and mask[1]:
            weight: int = raw(*args[:10], [False, True, False], *args[11:], **kwargs)
            count -= weight - weight // groups
        return count

    return {torch().ops.aten.convolution_backward: conv_backward}


def _scalar(out: Any) -> Any:
    tensors = [x for x in _tensors(out) if x.requires_grad and x.is_floating_point()]
    if not tensors:
        raise DescribeError("the model's output holds no floating-point tensor that needs a gradient")
    total = tensors[0].float().sum()
    for x in tensors[1:]:
        total = total + x.float().sum()
    return total


def _tensors(out: Any) -> Iterator[Any]:
    t = torch()
    if isinstance(out, t.Tensor):
        yield out
    elif isinstance(out, dict):
        for v in out.values():
            yield from _tensors(v)
    elif isinstance(out, list | tuple):
        for v in out:
            yield from _tensors(v)
    elif hasattr(out, "__dict__"):  # e.g. a model-output dataclass
        for v in vars(out).values():
            yield from _tensors(v)


class _OpCounter:
    """Counts the aten operators dispatched while active (views and metadata calls included)."""

    def __init__(self) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode

        counter = self

        class Mode(TorchDispatchMode):  # type: ignore[misc]
            def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                counter.count += 1
                return func(*args, **(kwargs or {}))

        self.count = 0
        self._mode = Mode()

    def __enter__(self) -> _OpCounter:
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._mode.__exit__(*exc)


def layer_counts(module: Any) -> tuple[tuple[str, int], ...]:
    """Leaf modules by kind (a ``MultiheadAttention`` counts once, as attention)."""
    counts = dict.fromkeys(LAYER_KINDS, 0)
    for sub in _leaves(module):
        kind = layer_kind(sub)
        if kind:
            counts[kind] += 1
    return tuple((k, n) for k, n in counts.items() if n)


def _leaves(module: Any) -> Iterator[Any]:
    nn = torch().nn
    children = list(module.children())
    if not children or isinstance(module, nn.MultiheadAttention | nn.RNNBase):
        yield module
        return
    for child in children:
        yield from _leaves(child)


def layer_kind(module: Any) -> str:
    """The kind of one leaf module ("" for containers' stand-ins: Identity, Dropout, Flatten)."""
    nn = torch().nn
    activation = torch().nn.modules.activation
    kinds: tuple[tuple[str, tuple[type, ...]], ...] = (
        ("attention", (nn.MultiheadAttention,)),
        ("conv", (nn.modules.conv._ConvNd,)),
        ("linear", (nn.Linear, nn.Bilinear)),
        ("recurrent", (nn.RNNBase, nn.RNNCellBase)),
        (
            "norm",
            (nn.modules.batchnorm._NormBase, nn.LayerNorm, nn.GroupNorm, nn.LocalResponseNorm, nn.RMSNorm),
        ),
        ("embedding", (nn.Embedding, nn.EmbeddingBag)),
    )
    for kind, classes in kinds:
        if isinstance(module, classes):
            return kind
    if type(module).__module__ == activation.__name__:
        return "activation"
    if isinstance(module, nn.Identity | nn.modules.dropout._DropoutNd | nn.Flatten | nn.Unflatten):
        return ""
    return "other"
