"""The rubric as data: load a validated rubric file, score stored check results, apply policy, export grades."""
from .diff import diff_scores, diff_totals
from .export import gradebook_csv, gradescope_results
from .load import DEFAULT_PATH, load_rubric, parse_rubric
from .model import Category, Item, Policy, Rubric, RubricError, Rule
from .policy import (apply_late_penalty, attempts_left, attempts_used, counted_submission, late_penalty,
                     next_period_starts)
from .score import score
from .view import points_by_check, student_view, summary_lines

__all__ = ["Category", "DEFAULT_PATH", "Item", "Policy", "Rubric", "RubricError", "Rule", "apply_late_penalty",
           "attempts_left", "attempts_used", "counted_submission", "diff_scores", "diff_totals", "gradebook_csv",
           "gradescope_results", "late_penalty", "load_rubric", "next_period_starts", "parse_rubric",
           "points_by_check", "score", "student_view", "summary_lines"]
