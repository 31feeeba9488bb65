"""The agent's switching-offload job (issue 27): place OneSwitch's virtual tables with the same solver as the
NFs, apply the moves through OneSwitch (its make-before-break), keep a table where it runs when OneSwitch
refuses (its reason recorded), and show where each table runs and why one stays on the host.

The instance is the agent's NF instance with every NF fixed where it runs (their moves are the re-placement
loop's) plus one vertex per table (nf_agent/tables.py); the NF re-placement in turn sees the tables fixed
where they run (`PlacementModel` reads `ctx.tables_seen`).
"""

from __future__ import annotations

from domain.errors import (
    Conflict,
    DependencyFailed,
    NotFound,
    NotSupported,
    TableRefused,
    TablesUnsupported,
    ValidationError,
)
from domain.model import HOST
from nf_agent import tables as tb
from nf_agent.context import AgentContext
from nf_agent.placement_model import PlacementModel
from placement import parse_problem

DRAIN_MS = (
    500  # a moved table's old copy keeps serving packets in flight for this long (OneSwitch's default: 0)
)


class TableOffload:
    def __init__(self, ctx: AgentContext, model: PlacementModel):
        self.ctx = ctx
        self.model = model
        self.refused: dict[int, str] = {}  # table -> OneSwitch's reason it refused the agent's last move
        self.planned: dict[int, str] = {}  # table -> location of the last solve

    # -- I/O edge -----------------------------------------------------------------------------------------
    def _switch(self) -> tb.TableSwitch:
        if self.ctx.tables is None:
            raise NotSupported("this agent runs without OneSwitch's tables (no switching offload)")
        return self.ctx.tables

    def _fetch(self) -> list:
        switch = self._switch()
        try:
            seen = switch.tables()
        except TablesUnsupported as exc:
            raise NotSupported(f"OneSwitch cannot place tables: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - OneSwitch down or answering garbage: a dependency failure
            raise DependencyFailed(f"OneSwitch's tables: {exc}") from None
        self.ctx.tables_seen = list(seen)
        return seen

    # -- the model ----------------------------------------------------------------------------------------
    def _live_snics(self) -> list[str]:
        return [s.id for s in self.ctx.cfg.snics if s.id not in self.ctx.down]

    def problem_json(self, seen: list) -> dict:
        """The instance: every NF fixed where it runs, the tables free (but for pins and refusals)."""
        nfs = list(self.ctx.state.nfs.values())
        tables = self.model.table_graph(seen, self.ctx.state.table_pins)
        return self.model.problem(nfs, fixed={n.id for n in nfs}, tables=tables)

    def _current(self, problem, seen: list) -> dict[str, str]:
        current = self.model.current_placement()
        current |= {tb.table_vertex(t.table): tb.model_location(t.location) or HOST for t in seen}
        full, _ = self.model.evaluate(problem, current)
        return full

    # -- REST ---------------------------------------------------------------------------------------------
    def view(self) -> list[dict]:
        """GET /v1/tables: every table with rules, where it runs, the operator's pin, and why it is on
        the host (None when it is not)."""
        with self.ctx.lock:
            seen = self._fetch()
            problem = parse_problem(self.problem_json(seen))
            current = self._current(problem, seen)
            pins = self.ctx.state.table_pins
            return [
                tb.table_row(t, pins.get(t.table), tb.why(problem, current, t, pins, self.refused),
                             self.planned.get(t.table))
                for t in sorted(seen, key=lambda t: t.table)
            ]  # fmt: skip

    def place(self) -> dict:
        """Solve for the tables and move every table whose optimum differs from where it runs. A refusal
        keeps the table where it was (recorded, shown as its reason); other tables still move."""
        ctx = self.ctx
        with ctx.lock:
            seen = self._fetch()
            problem_json = self.problem_json(seen)
            res = ctx.solver(problem_json)
            ctx.counters.solves += 1
            if res.get("status") not in ("optimal", "feasible"):
                out = {"moves": [], "refused": [], "status": res.get("status"), "reason": res.get("reason")}
                ctx.event("tables-placement", **out)
                return out
            moves, refused = [], []
            # off the sNICs first: what leaves an sNIC frees the rule memory the tables moving there need
            for t in sorted(
                seen, key=lambda t: (res["placement"].get(tb.table_vertex(t.table)) != HOST, t.table)
            ):
                want = res["placement"].get(tb.table_vertex(t.table))
                if want is None:
                    continue
                self.planned[t.table] = want
                split = self._split(t, want)
                if (want, split) == (t.location, t.host_min_priority):
                    continue
                try:
                    mv = self._switch().move_table(t.table, want, drain_ms=DRAIN_MS, host_min_priority=split)
                except TableRefused as exc:
                    self.refused[t.table] = exc.reason
                    refused.append({"table": t.table, "to": want, "reason": exc.reason})
                    continue
                except Exception as exc:  # noqa: BLE001 - the table stays where it was; the others still move
                    refused.append({"table": t.table, "to": want, "reason": f"OneSwitch: {exc}"})
                    continue
                self.refused.pop(t.table, None)
                moves.append({"table": t.table, "from": t.location, "to": want, "rules": mv.rules,
                              "ms": mv.ms, "host_min_priority": split})  # fmt: skip
            self._fetch()  # where they run now, for the NF model
            out = {
                "status": res["status"],
                "host_cost": res.get("host_cost"),
                "moves": moves,
                "refused": refused,
            }
            ctx.event("tables-placement", moves=moves, refused=refused)
            ctx.save()
            return out

    def _split(self, table, want: str) -> int | None:
        """The split `table` should run with at `want`: an operator's split pin's priority; else the split it
        runs now if it stays on that sNIC (one made on OneSwitch); else none (a move elsewhere unsplits)."""
        if table.table in self.ctx.state.table_pins:
            return self.ctx.state.table_splits.get(table.table)
        return table.host_min_priority if want == table.location else None

    def pin(self, table: int, where: str | None, split: int | None = None) -> dict:
        """PUT /v1/tables/{t} {"pin": "host" | SNIC | null, "host_min_priority"?: P}: keep the table there
        (null: the solver's again), split at P on that sNIC if given (OneSwitch's split: the sNIC runs the
        whole table, the host its rules of priority >= P for its own packets). The pin is persisted; the
        table moves there now (OneSwitch may refuse: a 409 then, and the pin is not kept)."""
        ctx = self.ctx
        with ctx.lock:
            if where is not None and where != HOST and where not in self._live_snics():
                raise ValidationError("pin", f"{where!r} is not host or a live sNIC ({self._live_snics()})")
            seen = {t.table: t for t in self._fetch()}
            if table not in seen:
                raise NotFound(f"no table {table} with rules in OneSwitch")
            moved = None
            now = (seen[table].location, seen[table].host_min_priority)
            if where is not None and now != (where, split):
                try:
                    mv = self._switch().move_table(table, where, drain_ms=DRAIN_MS, host_min_priority=split)
                except TableRefused as exc:
                    raise Conflict(
                        f"OneSwitch refused table {table} on {where}: {exc.reason}", "pin"
                    ) from None
                moved = {"from": mv.from_, "to": mv.to, "ms": mv.ms}
            if where is None:
                ctx.state.table_pins.pop(table, None)
            else:
                ctx.state.table_pins[table] = where
            if split is None:
                ctx.state.table_splits.pop(table, None)
            else:
                ctx.state.table_splits[table] = split
            ctx.event("table-pin", table=table, pin=where, host_min_priority=split, moved=moved)
            ctx.save()
            self._fetch()
            return {"table": table, "pin": where, "host_min_priority": split, "moved": moved}
