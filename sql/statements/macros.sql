-- DuckDB macros: the rules that SQL and Python share, each defined here and nowhere else.
-- Every query connection creates them before any view (runstore.query.macros); for other
-- engines (`runstore views --dialect`, Spark) each call is replaced by the macro's body; and
-- Python evaluates them here over values it already holds (a chart's points), so it never
-- restates one.

-- name: over_threshold
-- Whether `value` is over `threshold` in the direction of `op` ('>', '>=', '<' or '<='): the
-- one home of "over the threshold", which `kl_steps`, `run_summary`, `runstore check`, the KL
-- chart and the web UI read. NaN is never over, for any op: DuckDB and Spark sort NaN above
-- every number, so `NaN > 0.01` would be true there, and NaN is set aside before comparing.
-- +Infinity is above every number and -Infinity below. A null value is not over.
create macro over_threshold(value, op, threshold) as
    coalesce(not isnan(value) and case op when '>' then value > threshold
                                          when '>=' then value >= threshold
                                          when '<' then value < threshold
                                          when '<=' then value <= threshold end,
             false)
