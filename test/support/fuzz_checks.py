"""Schemathesis hooks of the project's fuzz test (test/api/fuzz.test.ts, loaded through SCHEMATHESIS_HOOKS).

`documented_refusals_only` is Schemathesis's positive-data check (ST202, `positive_data_acceptance`) made exact
for this API. A schema-valid request may still be refused where the document states a rule that no JSON Schema
can: between two values (a window's `from` before `to`), on state (an agent that is not published, a customer
that does not own the conversation), on content (bytes sniffed as not audio, an image with no text), or on the
network (a webhook host that does not resolve to a public address, a provider that refuses the credential).
Each such refusal is listed in REFUSALS with its operation, status, error code and message, and the status must be
one the document declares for the operation; any other refusal of schema-valid data fails, as ST202 does.
"""

import json
import re

import schemathesis
from schemathesis.openapi.checks import RejectedPositiveData

# Schemathesis's own accepted answers to positive data (`positive_data_acceptance`): a success, a redirect, a
# refusal for credentials, a resource that does not exist, a conflict with state, a rate limit; 5xx is another
# check's (not_a_server_error).
ACCEPTED = {401, 403, 404, 409, 429}

# operation label -> (status, error code, message pattern) of each refusal the document states for valid input.
_WINDOW = (400, "invalid_request", r"^(from|to)\b")
REFUSALS = {
    # Parameter descriptions: `from` before `to`, at most 400 days apart.
    "GET /api/v1/analytics/summary": [_WINDOW],
    "GET /api/v1/analytics/channel-breakdown": [_WINDOW],
    "GET /api/v1/analytics/conversations-over-time": [_WINDOW],
    "GET /api/v1/billing/usage": [_WINDOW],
    # `until` must be after `since`.
    "POST /api/v1/webhook-subscriptions/{id}/replay": [(400, "invalid_request", r"^body\.until: must be after since")],
    # URLs the service will call: https, a host that resolves to public addresses (the SSRF rule, checked at
    # registration and again at connect time).
    "POST /api/v1/webhook-subscriptions": [(400, "invalid_url", r"^url: ")],
    "PATCH /api/v1/webhook-subscriptions/{id}": [(400, "invalid_url", r"^url: ")],
    "POST /api/v1/credentials": [(400, "invalid_url", r"^(sip_uri|url|base_url): ")],
    # The provider's own answer about the stored credential; an llm credential's base_url is checked against the
    # address rules when it is called (it may resolve elsewhere since it was stored).
    "GET /api/v1/credentials/{id}/resources": [
        (422, "provider_refused", r""),
        (422, "invalid_url", r"^base_url: "),
        # A msgapp credential registered without its WhatsApp Business Account id cannot list phone numbers.
        (422, "business_account_required", r""),
    ],
    # A published agent is re-checked as publishing checks it: the provider must confirm that the agent's credential
    # owns its msgapp phone_number_id (the PATCH operation's description, 422 number_not_owned with `reasons`).
    "PATCH /api/v1/agents/{id}": [(422, "number_not_owned", r"")],
    "POST /api/v1/agents/{id}/publish": [(422, "number_not_owned", r"")],
    # Business hours: an interval may not be empty (open = close) nor overlap another, across midnight included.
    "PUT /api/v1/team/availability": [(400, "invalid_request", r"^hours\b")],
    # A site's origins are bare origins once trimmed and lower-cased (no path, query or fragment), and a launcher label
    # is one line of at most 40 characters (code points) once trimmed, as the operations' 400 descriptions say.
    "POST /api/console/sites": [(400, "invalid_request", r"^origins: ")],
    "PATCH /api/console/sites/{id}": [(400, "invalid_request", r"^(origins|launcher_label): ")],
    # A console password is also checked against the common-password list, which no schema can state.
    "POST /api/console/links/redeem": [(400, "weak_password", r"^password: ")],
    # The signalling path is a WebSocket: a plain GET is told to upgrade.
    "GET /api/voice/rtc": [(426, "upgrade_required", r"")],
    # Bytes are sniffed, never trusted from a name or a declared type.
    "POST /api/public/widget/transcribe": [(400, "not_audio", r"")],
    "POST /api/v1/kb/files": [(415, "unsupported_mime", r"")],
    "POST /api/v1/documents/extract_structured": [
        (422, "extraction_failed", r""),
        # `schema` is a JSON Schema sent as a multipart text field.
        (400, "bad_schema", r""),
    ],
    # The customer named must be the conversation's.
    "POST /api/public/widget/upload": [(400, "invalid_request", r"^customer_id: not the customer of conversation")],
    # The contract's send rules on state: the number's agent must be published and able to run, one agent must
    # claim the number, and outside the 24-hour session window only a template is deliverable.
    "POST /api/v1/messages": [
        (422, "agent_not_published", r""),
        (422, "sender_agent_invalid", r""),
        (422, "ambiguous_sender", r""),
        (422, "session_window_closed", r""),
    ],
}


def _declared(case, status):
    responses = (case.operation.definition.raw or {}).get("responses", {})
    return str(status) in responses or f"{str(status)[0]}XX" in responses


@schemathesis.check
def documented_refusals_only(ctx, response, case):
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return None
    status = response.status_code
    if status < 400 or status >= 500 or status in ACCEPTED:
        return None
    try:
        body = json.loads(response.content or b"{}")
    except ValueError:
        body = {}
    code = body.get("error") if isinstance(body, dict) else None
    message = body.get("message", "") if isinstance(body, dict) else ""
    label = case.operation.label
    for want_status, want_code, pattern in REFUSALS.get(label, []):
        if status == want_status and code == want_code and re.search(pattern, message or "") and _declared(case, status):
            return None
    raise RejectedPositiveData(
        operation=label,
        message=f"Valid data should have been accepted, or refused by a rule the document states (test/support/fuzz_checks.py)\nGot: {status} {code}: {message}",
        status_code=status,
        allowed_statuses=sorted(str(s) for s in ACCEPTED),
    )
