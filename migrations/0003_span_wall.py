"""Add `spans.wall_add_s`, each span's addition to its name's wall time in its step (what `slowest_spans.wall_s` sums), computed for the stored rows."""

# The sweep the `slowest_spans` view ran at query time before this column existed: per
# (run, step, name) in start order, each span adds the part of its interval past the latest
# end of the spans before it. A stored step holds the spans of one record only (a re-logged
# step's earlier rows were deleted), so this equals what ingest now computes per record.
SWEEP = """
with t as (
    select *, (wall_start_s is not null and wall_end_s is not null
               and not isnan(wall_start_s) and not isnan(wall_end_s)) as timed
    from old
),
swept as (
    select *, max(wall_end_s) over (
                  partition by run_id, step, name, timed
                  order by wall_start_s, wall_end_s, span_idx
                  rows between unbounded preceding and 1 preceding) as reach_s
    from t
)
select * exclude (timed, reach_s),
       case when timed then greatest(wall_end_s - greatest(wall_start_s,
                                                            coalesce(reach_s, wall_start_s)),
                                     0) end as wall_add_s
from swept
"""


def migrate(ctx):
    ctx.add_columns("spans", [("wall_add_s", "float64")])
    files = ctx.table_files("spans")
    if not files:
        return

    def rows(ctx):
        import duckdb
        import pyarrow as pa

        # Every stored file read whole, its checksum verified; correctness over speed: the
        # sweep needs all spans of a step together, and a compaction may have split them.
        # Columns other migrations added ride along (nulls in files older than them).
        parts = []
        for f in files:
            part = ctx.read_file(f)
            if "wall_add_s" in part.column_names:
                part = part.drop_columns(["wall_add_s"])
            # Files a Delta delete rewrote hold string_view columns.
            parts.append(part.cast(pa.schema(
                [pa.field(x.name, pa.string()) if x.type == pa.string_view() else x
                 for x in part.schema])))
        old = pa.concat_tables(parts, promote_options="default")
        con = duckdb.connect()
        con.register("old", old)
        return con.sql(f"select * from ({SWEEP}) order by run_id, step, span_idx"
                       ).to_arrow_table()

    ctx.rewrite_table("spans", rows)
