import { randomBytes } from 'node:crypto';
import type dgram from 'node:dgram';
import { authorization, parseChallenge, supported, type DigestChallenge } from './digest';
import { cseq, header, headers, newBranch, newTag, param, parseMessage, serialize, uriOf, type SipMessage } from './message';

/**
 * The user-agent client of one outgoing call over UDP (RFC 3261), as small as a trunk
 * call needs: the INVITE client transaction (Timer A retransmissions from T1, doubling;
 * Timer B gives up after 64·T1 without any response), ACK of every final response (in
 * the transaction for 3xx–6xx, end to end for 2xx, again for each retransmitted 2xx),
 * digest authentication on 401/407, CANCEL once a provisional response came (ringing
 * timeout, abort), and the dialog: our BYE (non-INVITE transaction, Timer E
 * retransmissions capped at T2, Timer F), the far end's BYE answered 200. Requests go to
 * the trunk's address (it is our outbound proxy); responses go back where the request
 * came from (rport, RFC 3581). No TCP/TLS, no forking (the first 2xx makes the dialog),
 * no early media, no re-INVITE of our own. A blind transfer: REFER (RFC 3515) in the
 * dialog, its progress read from the far end's NOTIFYs (message/sipfrag, RFC 3420).
 */

export interface UacOptions {
  socket: dgram.Socket;
  /** The trunk's resolved address: every request goes there. */
  next: { address: string; port: number };
  /** Our address as the far end should reach it (Via, Contact). */
  local: { address: string; port: number };
  /** Request-URI and To of the INVITE (`sip:+1…@trunk`). */
  target: string;
  /** From's URI (`sip:+1…@trunk`). */
  from: string;
  credentials?: { username: string; password: string };
  /** RFC 3261 T1 (ms; 500 by default). */
  t1Ms?: number;
  /** Answers to the far end's re-INVITE/UPDATE offers (the session as it is). */
  sessionSdp?: () => string;
}

/** The final outcome of the INVITE: the 2xx (the dialog is up) or a failure; status 0 when nothing answered (Timer B). */
export interface InviteResult {
  status: number;
  reason: string;
  body: string;
}

const T2_MS = 4000;

/** How a transfer went: `ok` when the far end reached the target (a 2xx in the NOTIFY's sipfrag). */
export interface ReferResult {
  ok: boolean;
  /** The REFER's failure status, else the last sipfrag's (0: no final word before the timeout). */
  status: number;
  reason: string;
}

/** The status line of a message/sipfrag body (`SIP/2.0 200 OK`); null when it has none. */
export function sipfragStatus(body: string): { status: number; reason: string } | null {
  const m = /^SIP\/2\.0 (\d{3}) ?([^\r\n]*)/.exec(body.trimStart());
  return m ? { status: Number(m[1]), reason: m[2].trim() } : null;
}

interface ClientTransaction {
  onResponse(res: SipMessage): void;
}

export class SipUac {
  readonly callId: string;
  private readonly fromTag = newTag();
  private seq = 0;
  private readonly t1: number;
  private readonly transactions = new Map<string, ClientTransaction>();
  /** Responses we sent, by the request's branch and method, for retransmitted requests. */
  private readonly answered = new Map<string, string>();
  private remoteTag: string | undefined;
  private remoteTarget: string | undefined;
  private routeSet: string[] = [];
  private inviteSeq = 0;
  /** The last ACK for a 2xx, re-sent when the 2xx is retransmitted. */
  private ack2xx: string | null = null;
  private challenge: { header: string; c: DigestChallenge; nc: number } | null = null;
  private byeListeners: Array<() => void> = [];
  /** The far end's NOTIFYs in the dialog (a transfer's progress). */
  private notifyListeners: Array<(req: SipMessage) => void> = [];
  private terminated = false;
  /** Set once CANCEL is wanted; sent as soon as a provisional response allows it. */
  private cancel: { wanted: boolean; sent: boolean; send: () => void } = { wanted: false, sent: false, send: () => undefined };
  private readonly timers = new Set<NodeJS.Timeout>();

  constructor(private readonly o: UacOptions) {
    this.t1 = o.t1Ms ?? 500;
    this.callId = `${randomBytes(12).toString('hex')}@${o.local.address}`;
    o.socket.on('message', (buf, rinfo) => this.onDatagram(buf, rinfo));
  }

  /** The dialog's remote end (Contact of the 2xx), once answered. */
  get dialog(): { remoteTag: string; remoteTarget: string } | null {
    return this.remoteTag && this.remoteTarget ? { remoteTag: this.remoteTag, remoteTarget: this.remoteTarget } : null;
  }

  /** Called once when the far end hangs up (its BYE, answered 200). */
  onBye(listener: () => void): void {
    this.byeListeners.push(listener);
  }

  /**
   * Sends the INVITE with `sdp` and resolves with its final response (already ACKed);
   * `provisional` sees each 1xx. A 401/407 is answered once with the credentials.
   */
  async invite(sdp: string, provisional: (status: number) => void): Promise<InviteResult> {
    let authorized = false;
    for (;;) {
      const res = await this.inviteOnce(sdp, provisional);
      const challenged = res.status === 401 || res.status === 407;
      if (!challenged || !this.o.credentials || this.cancel.wanted) return res;
      const name = res.status === 401 ? 'WWW-Authenticate' : 'Proxy-Authenticate';
      const c = headers(res.msg!, name).map(parseChallenge).find((x): x is DigestChallenge => !!x && supported(x));
      // A second challenge means the credentials were refused (unless only the nonce went stale).
      if (!c || (authorized && !c.stale)) return res;
      this.challenge = { header: res.status === 401 ? 'Authorization' : 'Proxy-Authorization', c, nc: 0 };
      authorized = true;
    }
  }

  private inviteOnce(sdp: string, provisional: (status: number) => void): Promise<InviteResult & { msg?: SipMessage }> {
    this.inviteSeq = ++this.seq;
    this.sawProvisional = false;
    const branch = newBranch();
    const request = this.request('INVITE', this.o.target, branch, this.inviteSeq, { to: `<${this.o.target}>`, body: sdp, contentType: 'application/sdp' });
    const wire = serialize(request);
    return new Promise((resolve) => {
      let final = false;
      let interval = this.t1;
      let timerA: NodeJS.Timeout | null = null;
      const retransmit = () => {
        this.send(wire);
        interval *= 2;
        timerA = this.timer(retransmit, interval);
      };
      const stopA = () => {
        if (timerA) this.clear(timerA);
        timerA = null;
      };
      const timerB = this.timer(() => {
        stopA();
        final = true;
        this.transactions.delete(`${branch}|INVITE`);
        resolve({ status: 0, reason: 'no response from the SIP trunk', body: '' });
      }, 64 * this.t1);
      let cancelGuard: NodeJS.Timeout | null = null;
      this.cancel.send = () => {
        if (this.cancel.sent || final) return;
        this.cancel.sent = true;
        this.sendCancel(request, branch);
        // The 487 should follow the CANCEL's 200; without it the call is given up after 64·T1.
        cancelGuard = this.timer(() => {
          if (final) return;
          final = true;
          this.transactions.delete(`${branch}|INVITE`);
          resolve({ status: 487, reason: 'Request Terminated (no final response after CANCEL)', body: '' });
        }, 64 * this.t1);
      };
      this.transactions.set(`${branch}|INVITE`, {
        onResponse: (res) => {
          stopA();
          this.clear(timerB);
          const status = res.status!;
          if (status < 200) {
            if (!final) provisional(status);
            if (this.cancel.wanted) this.cancel.send();
            return;
          }
          const toTag = param(header(res, 'To') ?? '', 'tag');
          if (status < 300) {
            // Every 2xx (and its retransmissions) is ACKed end to end; the first makes the dialog.
            if (!this.remoteTag) {
              this.remoteTag = toTag;
              this.remoteTarget = uriOf(header(res, 'Contact') ?? `<${this.o.target}>`);
              this.routeSet = headers(res, 'Record-Route').reverse();
              this.ack2xx = serialize(this.request('ACK', this.remoteTarget, newBranch(), this.inviteSeq, { withDialog: true }));
            }
            if (this.ack2xx) this.send(this.ack2xx);
          } else {
            // 3xx–6xx: the ACK belongs to the INVITE transaction (same branch, the response's To).
            const ack = this.request('ACK', this.o.target, branch, this.inviteSeq, { to: header(res, 'To') ?? `<${this.o.target}>` });
            this.send(serialize(ack));
          }
          if (final) return;
          final = true;
          if (cancelGuard) this.clear(cancelGuard);
          resolve({ status, reason: res.reason ?? '', body: res.body, msg: res });
        },
      });
      this.send(wire);
      timerA = this.timer(retransmit, interval);
    });
  }

  /** Abandons the call before the answer: CANCEL now if a provisional response came, else as soon as one does (RFC 3261 §9.1). */
  cancelInvite(): void {
    this.cancel.wanted = true;
    if (this.sawProvisional) this.cancel.send();
  }

  /** Whether the current INVITE has had a provisional response (CANCEL may be sent). */
  private sawProvisional = false;

  private sendCancel(invite: SipMessage, branch: string): void {
    // CANCEL copies the INVITE's Request-URI, Call-ID, From, To, CSeq number and its one Via (RFC 3261 §9.1).
    const msg: SipMessage = {
      method: 'CANCEL',
      uri: invite.uri,
      headers: invite.headers.filter(([n]) => ['Via', 'From', 'To', 'Call-ID', 'Route', 'Max-Forwards'].includes(n)).concat([['CSeq', `${this.inviteSeq} CANCEL`]]),
      body: '',
    };
    void this.nonInvite(msg, branch).catch(() => undefined);
  }

  /** Hangs up an answered call: BYE in the dialog; resolves on its final response or after `waitMs` (a dead trunk does not hold the hang-up). */
  async bye(waitMs = 4000): Promise<number> {
    if (this.terminated || !this.dialog) return 0;
    this.terminated = true;
    const send = (auth: boolean) => {
      const msg = this.request('BYE', this.remoteTarget!, newBranch(), ++this.seq, { withDialog: true, auth });
      return this.nonInvite(msg, param(msg.headers.find(([n]) => n === 'Via')![1], 'branch')!);
    };
    let timeout: NodeJS.Timeout | undefined;
    const limit = new Promise<number>((resolve) => (timeout = this.timer(() => resolve(0), waitMs)));
    const attempt = (async () => {
      let res = await send(false);
      if ((res.status === 401 || res.status === 407) && this.o.credentials) {
        const c = headers(res, res.status === 401 ? 'WWW-Authenticate' : 'Proxy-Authenticate').map(parseChallenge).find((x): x is DigestChallenge => !!x && supported(x));
        if (c) {
          this.challenge = { header: res.status === 401 ? 'Authorization' : 'Proxy-Authorization', c, nc: 0 };
          res = await send(true);
        }
      }
      return res.status ?? 0;
    })().catch(() => 0);
    const status = await Promise.race([attempt, limit]);
    if (timeout) this.clear(timeout);
    return status;
  }

  /**
   * A blind transfer (RFC 3515): REFER in the dialog with `Refer-To: <referTo>`. A 2xx
   * (202 Accepted) means the far end will try; its NOTIFYs (Event: refer, a sipfrag body)
   * say how the call to the target goes, answered 200 each; the first final status in
   * them (>= 200) ends the wait, as does `Subscription-State: terminated` or `waitMs`
   * (default 30 s). The dialog stays up: the caller sends BYE after a success (RFC 5589).
   */
  async refer(referTo: string, waitMs = 30_000): Promise<ReferResult> {
    if (this.terminated || !this.dialog) return { ok: false, status: 0, reason: 'the call is not connected' };
    let settle!: (r: ReferResult) => void;
    const done = new Promise<ReferResult>((resolve) => (settle = resolve));
    let last: ReferResult = { ok: false, status: 0, reason: 'no NOTIFY with a final status' };
    const listener = (req: SipMessage) => {
      if (!/^refer\b/i.test(header(req, 'Event') ?? '')) return;
      const frag = sipfragStatus(req.body);
      if (frag) last = { ok: frag.status >= 200 && frag.status < 300, ...frag };
      if ((frag && frag.status >= 200) || /^terminated/i.test(header(req, 'Subscription-State') ?? '')) settle(last);
    };
    this.notifyListeners.push(listener);
    const send = (auth: boolean) => {
      const msg = this.request('REFER', this.remoteTarget!, newBranch(), ++this.seq, { withDialog: true, auth });
      msg.headers.push(['Refer-To', `<${referTo}>`], ['Referred-By', `<${this.o.from}>`]);
      return this.nonInvite(msg, param(msg.headers.find(([n]) => n === 'Via')![1], 'branch')!);
    };
    let timeout: NodeJS.Timeout | undefined;
    try {
      let res = await send(false);
      if ((res.status === 401 || res.status === 407) && this.o.credentials) {
        const c = headers(res, res.status === 401 ? 'WWW-Authenticate' : 'Proxy-Authenticate').map(parseChallenge).find((x): x is DigestChallenge => !!x && supported(x));
        if (c) {
          this.challenge = { header: res.status === 401 ? 'Authorization' : 'Proxy-Authorization', c, nc: 0 };
          res = await send(true);
        }
      }
      if (res.status! >= 300) return { ok: false, status: res.status!, reason: res.reason ?? '' };
      timeout = this.timer(() => settle(last), waitMs);
      return await done;
    } catch (err) {
      return { ok: false, status: 0, reason: err instanceof Error ? err.message : String(err) };
    } finally {
      if (timeout) this.clear(timeout);
      this.notifyListeners = this.notifyListeners.filter((l) => l !== listener);
    }
  }

  /** A non-INVITE client transaction: Timer E retransmissions (T1 doubling to T2; T2 once provisional), Timer F after 64·T1. */
  private nonInvite(msg: SipMessage, branch: string): Promise<SipMessage> {
    const wire = serialize(msg);
    const key = `${branch}|${msg.method}`;
    return new Promise((resolve, reject) => {
      let interval = this.t1;
      let timerE: NodeJS.Timeout | null = null;
      const retransmit = () => {
        this.send(wire);
        interval = Math.min(interval * 2, T2_MS);
        timerE = this.timer(retransmit, interval);
      };
      const timerF = this.timer(() => {
        if (timerE) this.clear(timerE);
        this.transactions.delete(key);
        reject(new Error(`no response to ${msg.method}`));
      }, 64 * this.t1);
      this.transactions.set(key, {
        onResponse: (res) => {
          if (res.status! < 200) {
            interval = T2_MS;
            return;
          }
          if (timerE) this.clear(timerE);
          this.clear(timerF);
          this.transactions.delete(key);
          resolve(res);
        },
      });
      this.send(wire);
      timerE = this.timer(retransmit, interval);
    });
  }

  private request(
    method: string,
    uri: string,
    branch: string,
    seq: number,
    o: { to?: string; withDialog?: boolean; body?: string; contentType?: string; auth?: boolean },
  ): SipMessage {
    const { local } = this.o;
    const to = o.withDialog ? `<${this.o.target}>;tag=${this.remoteTag}` : o.to!;
    const h: Array<[string, string]> = [
      ['Via', `SIP/2.0/UDP ${local.address}:${local.port};rport;branch=${branch}`],
      ['Max-Forwards', '70'],
      ['From', `<${this.o.from}>;tag=${this.fromTag}`],
      ['To', to],
      ['Call-ID', this.callId],
      ['CSeq', `${seq} ${method}`],
    ];
    if (o.withDialog) for (const r of this.routeSet) h.push(['Route', r]);
    if (method === 'INVITE' || method === 'REFER') {
      h.push(['Contact', `<sip:concierge@${local.address}:${local.port};transport=udp>`]);
      h.push(['Allow', 'INVITE, ACK, CANCEL, BYE, OPTIONS, UPDATE, NOTIFY']);
    }
    h.push(['User-Agent', 'Concierge']);
    // INVITE, BYE and REFER carry our credentials once challenged (each with the next nonce count).
    if (this.challenge && this.o.credentials && (method === 'INVITE' || o.auth)) {
      this.challenge.nc++;
      h.push([this.challenge.header, authorization(this.challenge.c, { method, uri, ...this.o.credentials, nc: this.challenge.nc })]);
    }
    if (o.contentType) h.push(['Content-Type', o.contentType]);
    return { method, uri, headers: h, body: o.body ?? '' };
  }

  private onDatagram(buf: Buffer, from: { address: string; port: number }): void {
    // Only the trunk speaks SIP to this socket: anything else is neither answered nor believed.
    if (from.address !== this.o.next.address) return;
    const msg = parseMessage(buf);
    if (!msg) return;
    if (msg.status !== undefined) {
      const via = header(msg, 'Via');
      const branch = via ? param(via, 'branch') : undefined;
      const { method } = cseq(msg);
      if (msg.status < 200 && method === 'INVITE') this.sawProvisional = true;
      this.transactions.get(`${branch}|${method}`)?.onResponse(msg);
      return;
    }
    this.onRequest(msg, from);
  }

  /** The far end's requests: BYE ends the call; OPTIONS, re-INVITE and UPDATE keep it (the session unchanged); the rest is refused. */
  private onRequest(req: SipMessage, from: { address: string; port: number }): void {
    const method = req.method!;
    if (method === 'ACK') return;
    const via = header(req, 'Via') ?? '';
    const key = `${param(via, 'branch')}|${method}`;
    const cached = this.answered.get(key);
    if (cached) {
      this.o.socket.send(cached, from.port, from.address);
      return;
    }
    const ours = header(req, 'Call-ID') === this.callId;
    let status = 200;
    let reason = 'OK';
    let body = '';
    if (!ours && method !== 'OPTIONS') [status, reason] = [481, 'Call/Transaction Does Not Exist'];
    else if (method === 'BYE') {
      if (!this.terminated) {
        this.terminated = true;
        for (const l of this.byeListeners.splice(0)) l();
      }
    } else if (method === 'INVITE' || method === 'UPDATE') {
      if (this.o.sessionSdp) body = this.o.sessionSdp();
    } else if (method === 'NOTIFY') {
      for (const l of [...this.notifyListeners]) l(req);
    } else if (method !== 'OPTIONS') [status, reason] = [405, 'Method Not Allowed'];
    const to = header(req, 'To') ?? '';
    const h: Array<[string, string]> = [
      ...headers(req, 'Via').map((v): [string, string] => ['Via', v]),
      ['From', header(req, 'From') ?? ''],
      ['To', param(to, 'tag') === undefined ? `${to};tag=${this.fromTag}` : to],
      ['Call-ID', header(req, 'Call-ID') ?? ''],
      ['CSeq', header(req, 'CSeq') ?? ''],
    ];
    if (status === 405) h.push(['Allow', 'INVITE, ACK, CANCEL, BYE, OPTIONS, UPDATE, NOTIFY']);
    if (body) {
      h.push(['Contact', `<sip:concierge@${this.o.local.address}:${this.o.local.port};transport=udp>`]);
      h.push(['Content-Type', 'application/sdp']);
    }
    const wire = serialize({ status, reason, headers: h, body });
    this.answered.set(key, wire);
    this.o.socket.send(wire, from.port, from.address);
  }

  private send(wire: string): void {
    this.o.socket.send(wire, this.o.next.port, this.o.next.address);
  }

  private timer(fn: () => void, ms: number): NodeJS.Timeout {
    const t = setTimeout(() => {
      this.timers.delete(t);
      fn();
    }, ms);
    this.timers.add(t);
    return t;
  }

  private clear(t: NodeJS.Timeout): void {
    clearTimeout(t);
    this.timers.delete(t);
  }

  /** Stops every timer (the socket is closed by its owner). */
  dispose(): void {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.transactions.clear();
  }
}
