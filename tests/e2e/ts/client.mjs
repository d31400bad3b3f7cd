// Drives assay through the official TypeScript MCP SDK client (the one behind the MCP Inspector and most desktop,
// IDE and web clients) and writes a JSON report; tests/e2e/test_typescript_client.py writes the plan and judges the
// report.
//
//   node client.mjs PLAN.json REPORT.json
//
// PLAN: {"sessions": [{"label", "transport": "stdio", "command", "args", "env", "cwd", "steps"} |
//                     {"label", "transport": "http", "url", "headers"?, "expectConnectError"?, "steps"}]}
// "headers" go with every HTTP request (e.g. {"Authorization": "Bearer ..."}). A session with "expectConnectError"
// that fails to connect records the error as "connectError" (with "status", the HTTP status, when the SDK gives one)
// and runs nothing else; one that connects notes "connectError": null and goes on.
// A step is one of
//   {"kind": "call", "id", "tool", "args", "save"?, "progress"?}   tools/call; "save" keeps structuredContent
//   {"kind": "read", "id", "uri"}                                  resources/read
//   {"kind": "complete", "id", "ref", "argument", "context"?}      completion/complete
//   {"kind": "write", "id", "path", "text"}                        writes a file (one the index has not seen)
// Strings "{{name.key}}" in args and URIs are replaced by a value saved by an earlier step.
// Besides the steps, every session lists tools, resources and resource templates and reads every listed resource
// (unless it says "readListed": false: then, its reads counted against a rate limit, only the reads its steps ask).
// Nothing is judged here: the report holds what the SDK returned or threw, and the output-schema check of every
// structuredContent made again explicitly with the SDK's own Ajv validator.

import { readFileSync, writeFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';

const [planPath, reportPath] = process.argv.slice(2);
const plan = JSON.parse(readFileSync(planPath, 'utf8'));
const ajv = new AjvJsonSchemaValidator();
const TIMEOUT = { timeout: 120000 };

// A transport wrapper that notes the protocol version the server answered `initialize` with, and every progress
// notification as it arrives (the SDK hands a request's progress to its onprogress a tick after the message is read,
// and forgets the request's handler when the response is read: notifications that arrive in one read with the
// response never reach onprogress, so what the server sent is judged from the wire).
class Recording {
    constructor(inner) {
        this.inner = inner;
        this.protocolVersion = undefined;
        this.progress = [];
    }
    start() { return this.inner.start(); }
    send(message, options) { return this.inner.send(message, options); }
    close() { return this.inner.close(); }
    get sessionId() { return this.inner.sessionId; }
    setProtocolVersion(version) { this.inner.setProtocolVersion?.(version); }
    set onclose(fn) { this.inner.onclose = fn; }
    get onclose() { return this.inner.onclose; }
    set onerror(fn) { this.inner.onerror = fn; }
    get onerror() { return this.inner.onerror; }
    set onmessage(fn) {
        this.inner.onmessage = (message, extra) => {
            if (message?.result?.protocolVersion && message.result.serverInfo) {
                this.protocolVersion = message.result.protocolVersion;
            }
            if (message?.method === 'notifications/progress') this.progress.push(message.params);
            fn(message, extra);
        };
    }
}

function protocolError(err) {
    return { code: err?.code ?? null, message: String(err?.message ?? err), data: err?.data ?? null };
}

function substitute(value, saved) {
    if (typeof value === 'string') {
        return value.replace(/\{\{([\w-]+)\.([\w-]+)\}\}/g, (_, name, key) => {
            if (!(name in saved)) throw new Error(`nothing saved as ${name}`);
            return String(saved[name]?.[key]);
        });
    }
    if (Array.isArray(value)) return value.map((v) => substitute(v, saved));
    if (value && typeof value === 'object') {
        return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substitute(v, saved)]));
    }
    return value;
}

async function callTool(client, transport, tools, step, saved) {
    const out = { kind: 'call', id: step.id, tool: step.tool };
    const progress = [];
    transport.progress = [];
    try {
        out.args = substitute(step.args ?? {}, saved);
        const options = step.progress ? { ...TIMEOUT, onprogress: (p) => progress.push(p) } : TIMEOUT;
        const result = await client.callTool({ name: step.tool, arguments: out.args }, CallToolResultSchema, options);
        out.isError = result.isError === true;
        out.content = result.content;
        out.structuredContent = result.structuredContent ?? null;
        const schema = tools.get(step.tool)?.outputSchema;
        if (schema && result.structuredContent) {
            const check = ajv.getValidator(schema)(result.structuredContent);
            out.schemaValid = check.valid;
            out.schemaErrors = check.errorMessage ?? null;
        }
        if (step.save && result.structuredContent) saved[step.save] = result.structuredContent;
    } catch (err) {
        out.protocolError = protocolError(err);
    }
    if (step.progress) {
        out.progress = progress;  // as the SDK delivered it to onprogress
        out.wireProgress = transport.progress.map(({ progressToken, ...rest }) => rest);  // as the server sent it
    }
    return out;
}

async function readResource(client, step, saved) {
    const out = { kind: 'read', id: step.id };
    try {
        out.uri = substitute(step.uri, saved);
        const result = await client.readResource({ uri: out.uri }, TIMEOUT);
        out.contents = result.contents;
    } catch (err) {
        out.protocolError = protocolError(err);
    }
    return out;
}

async function complete(client, step, saved) {
    const out = { kind: 'complete', id: step.id, ref: step.ref, argument: step.argument };
    try {
        const params = { ref: step.ref, argument: substitute(step.argument, saved) };
        if (step.context) params.context = step.context;
        out.completion = (await client.complete(params, TIMEOUT)).completion;
    } catch (err) {
        out.protocolError = protocolError(err);
    }
    return out;
}

async function runSession(session) {
    const report = { label: session.label, transport: session.transport, steps: [] };
    const inner = session.transport === 'stdio'
        ? new StdioClientTransport({ command: session.command, args: session.args, env: session.env,
                                     cwd: session.cwd, stderr: 'inherit' })
        : new StreamableHTTPClientTransport(new URL(session.url),
                                            session.headers ? { requestInit: { headers: session.headers } } : undefined);
    const transport = new Recording(inner);
    const client = new Client({ name: 'assay-e2e-typescript', version: '1.0.0' });
    try {
        if (session.expectConnectError) {
            try {
                await client.connect(transport, TIMEOUT);
                report.connectError = null;
            } catch (err) {
                report.connectError = { ...protocolError(err),
                                        status: err instanceof StreamableHTTPError ? err.code : null };
                return report;
            }
        } else {
            await client.connect(transport, TIMEOUT);
        }
        report.protocolVersion = transport.protocolVersion;
        report.serverCapabilities = client.getServerCapabilities();
        const listed = (await client.listTools(undefined, TIMEOUT)).tools;
        report.tools = listed.map((t) => ({ name: t.name, inputSchema: t.inputSchema,
                                            outputSchema: t.outputSchema ?? null }));
        const tools = new Map(listed.map((t) => [t.name, t]));
        report.resources = (await client.listResources(undefined, TIMEOUT)).resources.map((r) => r.uri);
        report.resourceTemplates = (await client.listResourceTemplates(undefined, TIMEOUT)).resourceTemplates
            .map((t) => t.uriTemplate);
        const saved = {};
        for (const uri of session.readListed === false ? [] : report.resources) {
            report.steps.push(await readResource(client, { id: `listed ${uri}`, uri }, saved));
        }
        for (const step of session.steps) {
            if (step.kind === 'call') report.steps.push(await callTool(client, transport, tools, step, saved));
            else if (step.kind === 'read') report.steps.push(await readResource(client, step, saved));
            else if (step.kind === 'complete') report.steps.push(await complete(client, step, saved));
            else if (step.kind === 'write') writeFileSync(step.path, step.text);
            else throw new Error(`unknown step kind ${step.kind}`);
        }
    } catch (err) {
        report.fatal = protocolError(err);
    } finally {
        await client.close().catch(() => {});
    }
    return report;
}

const sessions = [];
for (const session of plan.sessions) {
    sessions.push(await runSession(session));
}
writeFileSync(reportPath, JSON.stringify({ sessions }, null, 1));
