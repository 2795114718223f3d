/**
 * Secrets a debugger page must never show, by their shape: what a tool's arguments or output, an activity's input or
 * a failure's message may carry (an API key pasted by a visitor, a bearer token a server echoed, a signed link). The
 * values the service itself seals never enter a turn's trace; this catches what arrives from outside. Patterns, so a
 * secret of an unknown shape can pass: the trace's texts are clipped and seen by signed-in people of the workspace.
 */
const PATTERNS: Array<[RegExp, string]> = [
  // This service's API keys, and the common providers' key shapes (OpenAI-style, AWS, Slack, GitHub, Stripe, webhooks).
  [/\bsk_[0-9a-f]{64}\b/g, 'sk_[redacted]'],
  [/\b(sk|pk|rk)-(?:proj-|live-|test-)?[A-Za-z0-9_-]{16,}/g, '$1-[redacted]'],
  [/\b(sk|pk|rk)_(live|test)_[A-Za-z0-9]{10,}/g, '$1_$2_[redacted]'],
  [/\bAKIA[0-9A-Z]{16}\b/g, 'AKIA[redacted]'],
  [/\bxox[abposr]-[A-Za-z0-9-]{10,}/g, 'xox-[redacted]'],
  [/\bgh[pousr]_[A-Za-z0-9]{20,}/g, 'gh_[redacted]'],
  [/\bwhsec_[A-Za-z0-9+/=]{10,}/g, 'whsec_[redacted]'],
  // JSON Web Tokens.
  [/\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/g, '[redacted token]'],
  // Authorization headers and the like.
  [/\b(Bearer|Basic|Token)\s+[A-Za-z0-9._~+/=-]{8,}/gi, '$1 [redacted]'],
  // "api_key": "…", password=…, ?token=… (JSON fields, form fields, query strings).
  [/("(?:[A-Za-z_-]*(?:secret|password|passwd|token|api[_-]?key|apikey|authorization|credential|private[_-]?key)[A-Za-z_-]*)"\s*:\s*)"(?:[^"\\]|\\.)*"/gi, '$1"[redacted]"'],
  [/\b((?:[A-Za-z_-]*(?:secret|password|passwd|token|api[_-]?key|apikey|signature|sig))=)[^&\s"']+/gi, '$1[redacted]'],
];

export function redactSecrets(text: string): string {
  let out = text;
  for (const [pattern, mark] of PATTERNS) out = out.replace(pattern, mark);
  return out;
}
