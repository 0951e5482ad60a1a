"""The Explorer base class and the helpers every explorer uses (see the package docstring)."""

from __future__ import annotations

import itertools
from pathlib import Path

import anywidget
import traitlets

from ..pages import viz

STATIC = Path(__file__).parent.parent / "static"


def frame_key(indices) -> str:
    """Key of a frame: the option index of each control, joined by '|' (e.g. '6|1')."""
    return "|".join(str(int(i)) for i in indices)


class Explorer(anywidget.AnyWidget):
    """Base class: a ``spec`` of controls, panels and precomputed frames.

    A subclass declares one synced trait per control (same name) and calls
    ``super().__init__(spec=...)`` with a spec built by :meth:`build_spec`.
    """

    _esm = STATIC / "explorer.js"
    _css = STATIC / "explorer.css"
    spec = traitlets.Dict().tag(sync=True)

    @staticmethod
    def build_spec(name, title, controls, panels, compute_frame, caption=""):
        """Compute one frame per combination of control values.

        controls: list of {"name", "label", "kind", "options"[, "labels"]}
        compute_frame(**values) -> {panel key: panel data}
        """
        frames = {}
        option_lists = [range(len(c["options"])) for c in controls]
        for indices in itertools.product(*option_lists):
            values = {c["name"]: c["options"][i] for c, i in zip(controls, indices)}
            frames[frame_key(indices)] = compute_frame(**values)
        return dict(name=name, title=title, caption=caption,
                    controls=controls, panels=panels, frames=frames)

    def _control(self, name):
        for control in self.spec["controls"]:
            if control["name"] == name:
                return control
        raise KeyError(name)

    def _check_option(self, name, value):
        options = self._control(name)["options"]
        if value not in options:
            raise ValueError(f"{name}={value!r} is not one of the explorer's options {options}")
        return value

    def frame(self, **values) -> dict:
        """The data of every panel for the current control values (or the ones given)."""
        indices = []
        for control in self.spec["controls"]:
            value = values.get(control["name"], getattr(self, control["name"]))
            indices.append(control["options"].index(self._check_option(control["name"], value)))
        return self.spec["frames"][frame_key(indices)]

    def figure(self, selections=None):
        """Static fallback: the panels drawn by matplotlib, one row per selection.

        selections: list of dicts of control values (default: the current values).
        """
        selections = selections or [{}]
        rows = [(sel, self.frame(**sel)) for sel in selections]
        return viz.explorer_figure(self.spec, rows)


def _round(t, digits=4):
    return [round(float(v), digits) for v in t.flatten()]


def _stat(name, label, value, digits):
    return {"name": name, "label": label, "value": round(float(value), 6), "digits": digits}
