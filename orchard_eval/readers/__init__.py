"""Readers that turn a case directory (Orchard or Apple-PI-GT layout) into an `EvalCase`."""
