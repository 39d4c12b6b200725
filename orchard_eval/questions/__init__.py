"""Law-derived balanced yes/no questions per case (PhyMetric-style): generation from the analytic
solution (`generate`), a programmatic answerer over measured tracks (`answer`), and scoring (`score`)."""
from .generate import GENERATOR_VERSION, generate_questions
from .answer import answer_questions
from .score import score_answers

__all__ = ["GENERATOR_VERSION", "generate_questions", "answer_questions", "score_answers"]
