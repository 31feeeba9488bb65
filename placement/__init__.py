"""UNO placement: decide for each NF whether it runs on the host CPU or on an sNIC (docs/placement.md).

from placement import parse_problem, solve
result = solve(parse_problem(json_obj), solver="cpsat", time_limit=5)
"""

from placement.model import HOST, PlacementInputError, Problem, parse_problem
from placement.solver import Options, solve

__all__ = ["HOST", "Options", "PlacementInputError", "Problem", "parse_problem", "solve"]
