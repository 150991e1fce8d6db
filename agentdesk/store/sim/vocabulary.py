"""Word lists the content generator draws from.

Kept apart from the generator's logic so the lists can grow without burying the
code. Some entries are deliberately hostile (HTML, scripts, ANSI escapes,
right-to-left and zero-width characters): agent output is untrusted text, and
every view must be seen rendering it safely.
"""

from __future__ import annotations

PROJECT_PREFIXES = ("Atlas", "Orion", "Nebula", "Harbor", "Juniper", "Kestrel", "Lumen", "Meridian",
                    "Quartz", "Sable", "Tamarack", "Vesper", "Willow", "Zephyr", "Basalt", "Cobalt")
PROJECT_SUFFIXES = ("billing service", "data pipeline", "docs site", "mobile app", "search API",
                    "payments platform", "onboarding flow", "analytics warehouse", "support bot",
                    "infra migration", "design system", "release tooling")

MODULES = ("invoice.py", "auth/session.py", "api/routes.ts", "pipeline/ingest.py", "ui/Table.tsx",
           "db/migrations", "cli/main.go", "search/ranker.rs", "billing/tax.py", "README.md")
COMPONENTS = ("the job queue", "the settings page", "the CSV exporter", "the webhook handler",
              "the auth middleware", "the nightly ETL", "the rate limiter", "the PDF renderer")
TECHS = ("SQLAlchemy 2", "Postgres 16", "React 19", "Kubernetes", "OpenTelemetry", "Rust", "pydantic v2")
TASK_TEMPLATES = (
    "Fix flaky test in {module}",
    "Migrate {component} to {tech}",
    "Add pagination to {component}",
    "Investigate latency spike in {component}",
    "Write release notes for v{major}.{minor}",
    "Summarize customer feedback about {component}",
    "Triage issue #{issue}: crash in {module}",
    "Refactor {module} for readability",
    "Add retries with backoff to {component}",
    "Audit dependencies for CVE-2025-{issue}",
)

ROLES = ("planner", "coder", "researcher", "reviewer", "tester", "writer", "data-analyst", "ops")
GIVEN_NAMES = ("ada", "iris", "otto", "mira", "felix", "noor", "kai", "lena", "ravi", "yuki",
               "sol", "tomas", "zara", "emil", "ines", "bo")

MODELS: dict[str, tuple[float, float]] = {
    # model name: (USD per million input tokens, USD per million output tokens)
    "claude-sonnet-4": (3.0, 15.0),
    "claude-opus-4": (15.0, 75.0),
    "claude-3-5-haiku": (0.8, 4.0),
    "gpt-4.1": (2.0, 8.0),
    "gpt-4.1-mini": (0.4, 1.6),
    "o3": (2.0, 8.0),
    "gemini-2.5-pro": (1.25, 10.0),
    "gemini-2.5-flash": (0.3, 2.5),
    "llama-3.3-70b": (0.6, 0.6),
    "mistral-large": (2.0, 6.0),
}

FILES = ("src/billing/invoice.py", "src/auth/session.py", "web/src/components/Table.tsx", "README.md",
         "pipeline/ingest.py", "tests/test_invoice.py", "docs/architecture.md", "infra/main.tf",
         "src/search/ranker.rs", "config/settings.yaml")
SHELL_COMMANDS = ("pytest -x tests/test_invoice.py", "npm run build", "git diff --stat HEAD~1",
                  "ruff check src/", "cargo test --release", "kubectl get pods -n staging",
                  "make migrate", "rm -rf build/ && make dist", "psql -c 'VACUUM ANALYZE'")
URLS = ("https://api.github.com/repos/acme/atlas/issues/412", "https://docs.python.org/3/library/sqlite3.html",
        "https://status.example.com/", "https://en.wikipedia.org/wiki/Write-ahead_logging",
        "https://news.ycombinator.com/item?id=41234567", "https://pypi.org/pypi/sqlalchemy/json")
QUERIES = ("def compute_tax", "TODO(security)", "class SessionStore", "retry_with_backoff",
           "SELECT .* FROM invoices", "useEffect(() =>", "unsafe {")
SQL = ("SELECT customer_id, SUM(amount) FROM invoices WHERE created_at > $1 GROUP BY 1 ORDER BY 2 DESC "
       "LIMIT 20",
       "SELECT count(*) FROM events WHERE kind = 'signup' AND at >= now() - interval '7 days'",
       "UPDATE accounts SET plan = 'pro' WHERE id = $1",
       "DELETE FROM sessions WHERE last_seen < now() - interval '90 days'")
EMAILS = ("ops@example.com", "billing-team@example.com", "cto@example.com", "customer-4411@example.org")
SEARCHES = ("sqlite busy_timeout WAL readers", "pyside6 QAbstractItemModel fetchMore",
            "kubernetes pod CrashLoopBackOff exit code 137", "stripe invoice proration rules")

UNICODE_SNIPPETS = (
    "Prix unitaire: 12,50 € — café inclus ✓",
    "価格の計算が正しくありません (税率 10%)",
    "שלום — right-to-left text \u202eevil.exe\u202c in a filename",
    "Emoji status: 🚀 deployed, 🔥 hotfix, ✅ tests",
    "zero\u200bwidth\u200djoiner and combining a\u0301ccents",
    "Ελληνικά, Кириллица, देवनागरी, 한국어",
)
HTML_PAGES = (
    '<!DOCTYPE html><html><head><title>Issue #412</title><script>alert("xss")</script></head>'
    '<body><h1>Crash in invoice.py</h1><p onclick="steal()">Stack trace below</p>'
    '<img src="http://tracker.example.com/pixel.gif"><a href="javascript:alert(1)">details</a></body></html>',
    "<html><body><table><tr><th>Service</th><th>Status</th></tr><tr><td>api</td>"
    "<td style='color:red'>degraded</td></tr></table><iframe src='https://evil.example'></iframe></body></html>",
    "<b>bold?</b> <i>italic?</i> &lt;escaped&gt; &amp; <u>underlined</u> <font size=7>BIG</font>",
)
ANSI_OUTPUT = "\x1b[32m12 passed\x1b[0m, \x1b[31m1 failed\x1b[0m in 3.21s"

TOOL_ERRORS: dict[str, tuple[str, ...]] = {
    "read_file": ("FileNotFoundError: [Errno 2] No such file or directory: '{path}'",
                  "PermissionError: [Errno 13] Permission denied: '{path}'"),
    "write_file": ("OSError: [Errno 28] No space left on device", "Refusing to write outside the workspace"),
    "run_shell": ("Command exited with status 1", "TimeoutError: command exceeded 120s",
                  "Killed (exit code 137: out of memory)"),
    "http_get": ("HTTP 503 Service Unavailable", "ConnectionResetError: [Errno 104] Connection reset by peer",
                 "SSL: CERTIFICATE_VERIFY_FAILED"),
    "search_code": ("ripgrep: regex parse error: unclosed group",),
    "sql_query": ('psycopg.errors.UndefinedColumn: column "amout" does not exist',
                  "canceling statement due to statement timeout"),
    "send_email": ("SMTPRecipientsRefused: 550 mailbox unavailable",),
    "web_search": ("HTTP 429 Too Many Requests",),
    "delegate": ("sub-agent exceeded its step budget",),
}
MODEL_ERRORS = ("429 Too Many Requests: rate limit exceeded, retry after 2s",
                "529 overloaded_error: the model is temporarily overloaded",
                "context_length_exceeded: 131072 tokens requested, limit is 128000")
RUN_FAILURES = ("max iterations (25) exceeded without a final answer", "unrecoverable tool error",
                "budget exceeded: $5.00 limit reached", "guardrail blocked the final answer")
DENIAL_REASONS = ("touches production; use staging", "too broad: limit it to tests/",
                  "that email goes to a customer, draft it first", "not during the release freeze",
                  "the DELETE has no backup")
OPERATORS = ("alice", "bob", "chen", "dana")
GUARDRAILS = ("pii_check", "prompt_injection_scan", "toxicity_filter", "secrets_scan", "cost_limit")
USER_PROMPTS = (
    "Please {task}. Keep the change small and explain what you did.",
    "Can you {task}? The on-call engineer is waiting for this.",
    "{task} — and make sure the tests still pass.",
    "Here is the ticket: {task}. Ask before touching anything in production.",
)
ASSISTANT_REPLIES = (
    "I looked at {file} and found the cause: an off-by-one in the pagination cursor. Fixed and tested.",
    "Done. I changed {file}; all 48 tests pass. One follow-up: the retry limit should be configurable.",
    "Summary: the latency comes from an N+1 query in {file}. I batched it; p95 drops from 840 ms to 95 ms.",
    "I could not finish: {file} is generated code. Suggest changing the generator instead.",
    "Plan: 1) reproduce, 2) add a failing test, 3) fix {file}, 4) run the full suite. Starting with 1.",
)
