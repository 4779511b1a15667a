"""Drives `rca mcp` with the official MCP Python SDK (PyPI `mcp`), as an agent host would.

    client.py stdio RCA INCIDENT RUNS    spawns `rca mcp INCIDENT --runs RUNS --head-chars 400`
    client.py http URL TOKEN             connects to a running `rca mcp --http`
    client.py refused URL TOKEN          the same with a wrong TOKEN (or "-", none): must fail
    client.py live URL TOKEN             the live incident (OTLP exports received): components,
                                         templates and the diagnosis
    client.py live-metrics URL TOKEN ENTITY  the live incident's components and ENTITY's
                                         metrics (a configuration's Prometheus)

Lists the tools, checks every input and output schema is a valid JSON Schema, calls each tool
with arguments that validate against its input schema, validates each result's structured
content against the tool's output schema (the SDK does too), reads a cut result back through
its snapshot key, reads the stored report as a resource and gets the investigation prompt.
Prints a JSON summary on stdout; any failed check raises (non-zero exit).
"""

import asyncio
import json
import sys

import jsonschema
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

EXPECTED_TOOLS = {
    "get_logs", "get_metrics", "get_traces", "get_db_records", "analyze_logs", "analyze_code",
    "diagnose", "list_components", "log_templates", "read_snapshot",
}


def check(cond, what):
    if not cond:
        raise AssertionError(what)


async def call(session, schemas, name, args, expect_error=False):
    """Calls `name` with `args` (checked against its input schema); checks the result."""
    jsonschema.validate(args, schemas[name][0])
    result = await session.call_tool(name, args)
    text = "".join(getattr(c, "text", "") for c in result.content)
    if expect_error:
        check(result.is_error, f"{name} {args} should have failed: {text[:300]}")
        return None, text
    check(not result.is_error, f"{name} {args} failed: {text[:500]}")
    check(result.structured_content is not None, f"{name}: no structured content")
    jsonschema.validate(result.structured_content, schemas[name][1])
    return result.structured_content, text


async def exercise(session):
    summary = {}
    await session.initialize()
    listed = (await session.list_tools()).tools
    schemas = {}
    for tool in listed:
        jsonschema.Draft202012Validator.check_schema(tool.input_schema)
        check(tool.output_schema is not None, f"{tool.name}: no output schema")
        jsonschema.Draft202012Validator.check_schema(tool.output_schema)
        schemas[tool.name] = (tool.input_schema, tool.output_schema)
    check(set(schemas) == EXPECTED_TOOLS, f"tools: {sorted(schemas)}")
    summary["tools"] = sorted(schemas)

    comps, _ = await call(session, schemas, "list_components", {})
    incident = comps["incident"]
    with_all = [c["name"] for c in comps["components"]
                if c["logs"] and c["metric_series"] and c["traces"]]
    check(with_all, "a component with logs, metrics and traces")
    entity = with_all[0]
    summary["incident"] = incident
    summary["components"] = len(comps["components"])

    metrics, _ = await call(session, schemas, "get_metrics", {"entity": entity})
    check(metrics["tool"] == "get_metrics" and metrics["full_chars"] > 0, "get_metrics text")
    traces, _ = await call(session, schemas, "get_traces", {"incident": incident, "entity": entity})
    check(traces["full_chars"] > 0, "get_traces text")
    logs, _ = await call(session, schemas, "get_logs", {"entity": entity, "min_level": "INFO"})
    summary["logs_cut"] = logs["cut"]
    # A cut result is read back, page by page, through its snapshot key.
    cut = next((r for r in (logs, metrics, traces) if r["cut"]), None)
    check(cut is not None, "a result cut at --head-chars")
    key, offset, pages, total = cut["snapshot_key"], 0, [], None
    while offset is not None:
        page, _ = await call(session, schemas, "read_snapshot", {"key": key, "offset": offset})
        pages.append(page["text"])
        total = page["total_chars"]
        offset = page["next_offset"]
    check(len("".join(pages)) == total == cut["full_chars"], "the snapshot reads back whole")
    summary["snapshot_chars"] = total
    # The log expert over the cut text, by its key.
    expert, _ = await call(session, schemas, "analyze_logs",
                           {"text": key, "question": "what fails?", "entity": entity})
    check(expert["tool"] == "analyze_logs", "analyze_logs")

    templates, _ = await call(session, schemas, "log_templates", {"limit": 5})
    check(0 < len(templates["templates"]) <= 5 and templates["lines"] > 0, "templates")
    summary["templates"] = templates["total_templates"]

    diagnosis, markdown = await call(session, schemas, "diagnose", {})
    candidates = diagnosis["report"]["candidates"]
    check(candidates, "candidates")
    check(markdown.startswith("#"), "the Markdown report as text content")
    summary["top_candidate"] = candidates[0]["component"]
    summary["trajectory_uri"] = diagnosis["trajectory_uri"]

    # Refusals come back as error results the host shows to the model.
    _, refused = await call(session, schemas, "get_db_records", {"entity": entity}, expect_error=True)
    check("no data" in refused, f"get_db_records on an incident without tables: {refused}")
    _, refused = await call(session, schemas, "get_metrics",
                            {"incident": "../../etc", "entity": entity}, expect_error=True)
    summary["path_refusal"] = refused
    bad = await session.call_tool("get_metrics", {"entity": entity, "sql": "select 1"})
    check(bad.is_error, "unknown argument refused")
    summary["bad_args"] = "".join(getattr(c, "text", "") for c in bad.content)[:200]

    resources = (await session.list_resources()).resources
    uris = sorted(str(r.uri) for r in resources)
    check(diagnosis["trajectory_uri"] in uris, f"stored trajectory listed: {uris}")
    report_uri = diagnosis["report_uri"]
    read = await session.read_resource(report_uri)
    check(read.contents[0].text.startswith("#"), "the stored report reads back")
    trajectory = json.loads((await session.read_resource(diagnosis["trajectory_uri"])).contents[0].text)
    check(trajectory["format_version"] == 1 and trajectory["report"]["candidates"], "trajectory")
    summary["resources"] = len(uris)

    prompts = (await session.list_prompts()).prompts
    check([p.name for p in prompts] == ["investigate"], "the investigate prompt")
    prompt = await session.get_prompt("investigate", {"incident": incident, "focus": "latency"})
    text = prompt.messages[0].content.text
    check("diagnose" in text and incident in text, "the prompt names the tools and the incident")
    return summary


async def exercise_live(session):
    await session.initialize()
    schemas = {t.name: (t.input_schema, t.output_schema) for t in (await session.list_tools()).tools}
    comps, _ = await call(session, schemas, "list_components", {"incident": "live"})
    check(comps["incidents"][0] == "live", f"live listed: {comps['incidents']}")
    templates, _ = await call(session, schemas, "log_templates", {"incident": "live", "limit": 5})
    diagnosis, markdown = await call(session, schemas, "diagnose", {"incident": "live"})
    check(markdown.startswith("#"), "the Markdown report as text content")
    candidates = diagnosis["report"]["candidates"]
    return {
        "components": sorted(c["name"] for c in comps["components"]),
        "log_lines": templates["lines"],
        "top_candidate": candidates[0]["component"] if candidates else None,
    }


async def exercise_live_metrics(session, entity):
    await session.initialize()
    schemas = {t.name: (t.input_schema, t.output_schema) for t in (await session.list_tools()).tools}
    comps, _ = await call(session, schemas, "list_components", {"incident": "live"})
    metrics, text = await call(session, schemas, "get_metrics", {"incident": "live", "entity": entity})
    check(metrics["tool"] == "get_metrics", "get_metrics structured content")
    return {
        "components": sorted(c["name"] for c in comps["components"]),
        "metrics": comps.get("metrics"),
        "metrics_text": text,
    }


async def over_stdio(rca, incident, runs):
    params = StdioServerParameters(
        command=rca,
        args=["mcp", incident, "--runs", runs, "--head-chars", "400"],
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=300) as session:
            return await exercise(session)


async def over_http(url, token, exercise=exercise):
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    headers = {} if token == "-" else {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(300.0)) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=300) as session:
                return await exercise(session)


def main():
    mode = sys.argv[1]
    # Every wait is bounded: each request by the session's read timeout, the whole run here.
    if mode == "stdio":
        run = over_stdio(sys.argv[2], sys.argv[3], sys.argv[4])
    elif mode == "http":
        run = over_http(sys.argv[2], sys.argv[3])
    elif mode == "live":
        run = over_http(sys.argv[2], sys.argv[3], exercise_live)
    elif mode == "live-metrics":
        entity = sys.argv[4]
        run = over_http(sys.argv[2], sys.argv[3], lambda s: exercise_live_metrics(s, entity))
    else:
        try:
            asyncio.run(asyncio.wait_for(over_http(sys.argv[2], sys.argv[3]), timeout=120))
        except BaseException as e:  # the SDK raises an exception group
            json.dump({"refused": True, "error": repr(e)[:500]}, sys.stdout)
            return
        raise AssertionError("the server answered a client without the token")
    summary = asyncio.run(asyncio.wait_for(run, timeout=900))
    json.dump(summary, sys.stdout)


if __name__ == "__main__":
    main()
