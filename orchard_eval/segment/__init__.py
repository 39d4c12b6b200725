"""Segmentation of generated frames into per-object masks.

`ClassicalSegmenter` needs no learned weights: objects-on-white answers by foreground extraction,
in-scene frames by Lab differencing against the case's clean plate. A SAM-family model plugs in by
implementing the `Segmenter` protocol and registering itself with `register_segmenter`.
"""
from __future__ import annotations

from typing import Callable

from .base import SegmentContext, Segmentation, Segmenter
from .classical import ClassicalSegmenter, context_for_case

_REGISTRY: dict[str, Callable[[], Segmenter]] = {"classical": ClassicalSegmenter}


def register_segmenter(name: str, factory: Callable[[], Segmenter]) -> None:
    _REGISTRY[name] = factory


def get_segmenter(name: str = "classical") -> Segmenter:
    try:
        return _REGISTRY[name]()
    except KeyError as exc:
        raise KeyError(f"unknown segmenter {name!r}; known: {sorted(_REGISTRY)}") from exc


__all__ = ["SegmentContext", "Segmentation", "Segmenter", "ClassicalSegmenter", "context_for_case",
           "register_segmenter", "get_segmenter"]
