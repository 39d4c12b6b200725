"""`orchard-eval report`: a self-contained static HTML report of one or more results directories
(overview, one page per case, comparison), readable from disk with no network access."""
from .build import ReportError, write_report

__all__ = ["ReportError", "write_report"]
