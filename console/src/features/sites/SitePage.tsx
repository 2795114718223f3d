import { useEffect, useId, useLayoutEffect, useRef, useState, type FormEvent } from 'react';
import { ConfirmDialog, Dialog } from '../../components/Dialog';
import { ErrorAlert, Loading, useAnnounce } from '../../components/feedback';
import { Field, TextArea } from '../../components/Field';
import { NotAllowed, Page } from '../../components/Page';
import { SecretOnce } from '../../components/SecretOnce';
import { describeError } from '../../lib/api';
import { when } from '../../lib/format';
import { Link } from '../../lib/router';
import { managesWorkspace, type Session } from '../auth/api';
import {
  hexColour,
  KNOWN_COMMANDS,
  LANGUAGES,
  originsOf,
  POSITIONS,
  textOn,
  THEMES,
  useAgent,
  useRotateSiteSecret,
  useSetSiteStatus,
  useSite,
  useUpdateSite,
  useUpdateWebChat,
  type Agent,
  type Appearance,
  type Site,
} from './api';
import { SiteStatus, Snippet } from './SitesPage';

/** One site: the snippet, secret rotation, suspend/resume, origins, page commands, the widget's look, and the agent's identity rule. */
export function SitePage({ session, id }: { session: Session; id: string }) {
  if (!managesWorkspace(session.user.role)) return <NotAllowed title="Site" why="Only owners and admins manage web-chat sites." />;
  return <SiteDetail id={id} />;
}

type Open = 'rotate' | 'suspend' | null;

function SiteDetail({ id }: { id: string }) {
  const site = useSite(id);
  const [open, setOpen] = useState<Open>(null);
  const close = () => setOpen(null);
  if (site.isPending) return <Loading what="the site" />;
  if (site.isError) {
    return (
      <Page title="Site">
        <ErrorAlert error={site.error} />
        <Link to="/sites">All sites</Link>
      </Page>
    );
  }
  const s = site.data;
  return (
    <Page title="Site">
      <Link to="/sites" className="back">
        All sites
      </Link>
      <dl className="facts card">
        <div className="wide-fact">
          <dt>Site id</dt>
          <dd className="mono wrap-anywhere">{s.id}</dd>
        </div>
        <div>
          <dt>Agent</dt>
          <dd>{s.agent.name ?? 'Deleted agent'}</dd>
        </div>
        <div>
          <dt>Status</dt>
          <dd>
            <SiteStatus site={s} />
          </dd>
        </div>
        <div>
          <dt>Created</dt>
          <dd>{when(s.created_at)}</dd>
        </div>
        <div>
          <dt>Previous secret</dt>
          <dd>{s.previous_secret ? `Still verifies until ${when(s.previous_secret.expires_at)}` : 'None'}</dd>
        </div>
      </dl>
      <Actions site={s} onOpen={setOpen} />
      <section className="section" aria-labelledby={`${id}-embed`}>
        <h2 id={`${id}-embed`}>Add the widget to your site</h2>
        <Snippet code={s.snippet} />
      </section>
      <OriginsForm site={s} />
      <CommandsForm site={s} />
      <AppearanceForm site={s} />
      <AgentSettings agentId={s.agent.id} />
      {open === 'rotate' ? <RotateDialog site={s} onClose={close} /> : null}
      {open === 'suspend' ? <SuspendDialog site={s} onClose={close} /> : null}
    </Page>
  );
}

function Actions({ site, onOpen }: { site: Site; onOpen: (open: Open) => void }) {
  const status = useSetSiteStatus(site.id);
  const announce = useAnnounce();
  return (
    <div className="toolbar">
      <button type="button" className="button" onClick={() => onOpen('rotate')}>
        Rotate secret
      </button>
      {site.status === 'suspended' ? (
        <button
          type="button"
          className="button"
          disabled={status.isPending}
          onClick={() => status.mutate('resume', { onSuccess: () => announce('Site resumed: the widget works again.'), onError: (err) => announce(describeError(err)) })}
        >
          Resume
        </button>
      ) : (
        <button type="button" className="button danger" onClick={() => onOpen('suspend')}>
          Suspend
        </button>
      )}
    </div>
  );
}

function RotateDialog({ site, onClose }: { site: Site; onClose: () => void }) {
  const rotate = useRotateSiteSecret(site.id);
  const [grace, setGrace] = useState('24');
  if (rotate.data) {
    return (
      <Dialog title="Secret rotated" onClose={onClose}>
        <SecretOnce
          label="New site secret"
          value={rotate.data.site_secret}
          note={`Sign user_hash with this secret from now on; the previous one still verifies until ${when(rotate.data.previous_expires_at)}. Copy it now: it is shown only this once.`}
        />
        <div className="dialog-actions">
          <button type="button" className="button primary" onClick={onClose}>
            Done
          </button>
        </div>
      </Dialog>
    );
  }
  const hours = Number(grace);
  const valid = grace.trim() !== '' && Number.isInteger(hours) && hours >= 0 && hours <= 720;
  return (
    <ConfirmDialog
      title="Rotate the site secret?"
      body={<p>A new secret is made at once. Signed-in visitors whose hash your server signed with the old one keep working during the grace period; after it, only the new secret verifies.</p>}
      confirm="Rotate secret"
      busy={rotate.isPending || !valid}
      error={rotate.error}
      onConfirm={() => rotate.mutate(hours)}
      onClose={onClose}
    >
      <Field label="Grace period (hours)" type="number" inputMode="numeric" min={0} max={720} step={1} required value={grace} onChange={(e) => setGrace(e.target.value)} hint="0 to 720; 0 retires the old secret at once." />
    </ConfirmDialog>
  );
}

function SuspendDialog({ site, onClose }: { site: Site; onClose: () => void }) {
  const status = useSetSiteStatus(site.id);
  const announce = useAnnounce();
  return (
    <ConfirmDialog
      title="Suspend this site?"
      body={<p>The widget stops working on {site.allowed_origins.join(', ')} at once: its requests are refused and open conversations are disconnected. You can resume it later.</p>}
      confirm="Suspend site"
      danger
      busy={status.isPending}
      error={status.error}
      onConfirm={() =>
        status.mutate('suspend', {
          onSuccess: () => {
            announce('Site suspended.');
            onClose();
          },
        })
      }
      onClose={onClose}
    />
  );
}

/** A form of the site's settings that saves with PATCH and says so. */
function useSave(site: Site, what: string) {
  const update = useUpdateSite(site.id);
  const announce = useAnnounce();
  const save = (change: Parameters<typeof update.mutate>[0]) => update.mutate(change, { onSuccess: () => announce(`${what} saved.`) });
  return { save, pending: update.isPending, error: update.error };
}

function OriginsForm({ site }: { site: Site }) {
  const [text, setText] = useState(site.allowed_origins.join('\n'));
  const { save, pending, error } = useSave(site, 'Allowed origins');
  useEffect(() => setText(site.allowed_origins.join('\n')), [site.allowed_origins]);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    save({ origins: originsOf(text) });
  };
  return (
    <section className="section" aria-labelledby={`${site.id}-origins`}>
      <h2 id={`${site.id}-origins`}>Allowed origins</h2>
      <form className="stack" onSubmit={submit}>
        <TextArea
          label="Origins"
          rows={3}
          required
          value={text}
          onChange={(e) => setText(e.target.value)}
          hint="One per line, such as https://shop.example. The widget is refused anywhere else; removing an origin disconnects its open conversations."
        />
        <ErrorAlert error={error} />
        <div className="row">
          <button type="submit" className="button primary" disabled={pending || !originsOf(text).length}>
            Save origins
          </button>
        </div>
      </form>
    </section>
  );
}

function CommandsForm({ site }: { site: Site }) {
  const [text, setText] = useState(site.page_commands.join(', '));
  const { save, pending, error } = useSave(site, 'Page commands');
  useEffect(() => setText(site.page_commands.join(', ')), [site.page_commands]);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    save({ page_commands: originsOf(text) });
  };
  return (
    <section className="section" aria-labelledby={`${site.id}-commands`}>
      <h2 id={`${site.id}-commands`}>Page commands</h2>
      <form className="stack" onSubmit={submit}>
        <Field
          label="Commands your page handles"
          value={text}
          onChange={(e) => setText(e.target.value)}
          placeholder="navigate, open_checkout"
          hint={
            <>
              Separated by commas; empty turns them off. The agent may then ask the page to act (ConciergeWidget.on('ui:command')). Known:{' '}
              <span className="mono">{KNOWN_COMMANDS.join(', ')}</span>; any other lower_snake_case name gets plain data.
            </>
          }
        />
        <ErrorAlert error={error} />
        <div className="row">
          <button type="submit" className="button primary" disabled={pending}>
            Save page commands
          </button>
        </div>
      </form>
    </section>
  );
}

function AppearanceForm({ site }: { site: Site }) {
  const [look, setLook] = useState<Appearance>(site.appearance);
  const [colour, setColour] = useState(site.appearance.brand_color);
  const { save, pending, error } = useSave(site, 'Appearance');
  useEffect(() => {
    setLook(site.appearance);
    setColour(site.appearance.brand_color);
  }, [site.appearance]);
  const ids = { position: useId(), theme: useId(), language: useId(), picker: useId() };
  const brand = hexColour(colour);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (!brand) return;
    save({ appearance: { ...look, brand_color: brand, launcher_label: look.launcher_label?.trim() ? look.launcher_label : null } });
  };
  return (
    <section className="section" aria-labelledby={`${site.id}-look`}>
      <h2 id={`${site.id}-look`}>Appearance</h2>
      <form className="stack" onSubmit={submit}>
        <div className="look">
          <div className="stack">
            <Field
              label="Brand colour"
              value={colour}
              onChange={(e) => setColour(e.target.value)}
              required
              aria-invalid={!brand}
              hint={brand ? 'A hex colour such as #243b6b or #0a7. It paints the launcher, the header and the visitor’s messages.' : 'Not a hex colour: use #rgb or #rrggbb.'}
            />
            <div className="field">
              <label htmlFor={ids.picker}>Colour picker</label>
              <input id={ids.picker} type="color" className="colour-picker" value={brand ?? '#243b6b'} onChange={(e) => setColour(e.target.value)} />
            </div>
          </div>
          <Preview brand={brand} label={look.launcher_label} />
        </div>
        <div className="field">
          <label htmlFor={ids.position}>Launcher position</label>
          <select id={ids.position} className="select" value={look.position} onChange={(e) => setLook({ ...look, position: e.target.value as Appearance['position'] })}>
            {Object.entries(POSITIONS).map(([value, label]) => (
              <option key={value} value={value}>
                {label}
              </option>
            ))}
          </select>
        </div>
        <Field
          label="Launcher label"
          value={look.launcher_label ?? ''}
          maxLength={40}
          onChange={(e) => setLook({ ...look, launcher_label: e.target.value })}
          hint="Text beside the chat icon, up to 40 characters; empty shows the icon alone."
        />
        <div className="field">
          <label htmlFor={ids.theme}>Theme</label>
          <select id={ids.theme} className="select" value={look.theme} onChange={(e) => setLook({ ...look, theme: e.target.value as Appearance['theme'] })}>
            {Object.entries(THEMES).map(([value, label]) => (
              <option key={value} value={value}>
                {label}
              </option>
            ))}
          </select>
        </div>
        <div className="field">
          <label htmlFor={ids.language}>Language</label>
          <select id={ids.language} className="select" value={look.language} onChange={(e) => setLook({ ...look, language: e.target.value as Appearance['language'] })}>
            {Object.entries(LANGUAGES).map(([value, label]) => (
              <option key={value} value={value}>
                {label}
              </option>
            ))}
          </select>
        </div>
        <ErrorAlert error={error} />
        <div className="row">
          <button type="submit" className="button primary" disabled={pending || !brand}>
            Save appearance
          </button>
        </div>
      </form>
    </section>
  );
}

/**
 * The launcher as the widget would paint it: the brand colour with the text colour the widget picks. Colours are set
 * as CSS variables through the CSSOM (the page's Content-Security-Policy allows no style attribute in markup).
 */
function Preview({ brand, label }: { brand: string | null; label: string | null }) {
  const swatch = useRef<HTMLDivElement>(null);
  const colour = brand ?? '#243b6b';
  const on = textOn(colour);
  useLayoutEffect(() => {
    swatch.current?.style.setProperty('--swatch-bg', colour);
    swatch.current?.style.setProperty('--swatch-fg', on.colour);
  }, [colour, on.colour]);
  return (
    <figure className="preview">
      <div ref={swatch} className="swatch" aria-hidden="true">
        {label?.trim() || 'Chat'}
      </div>
      <figcaption className="hint" aria-live="polite">
        Preview: {on.name} text ({on.colour}) on {colour}, contrast {on.ratio.toFixed(1)}:1.
      </figcaption>
    </figure>
  );
}

/** The agent's web-chat settings this site uses: the identity-verification rule and the greeting (shared by the agent's sites). */
function AgentSettings({ agentId }: { agentId: string }) {
  const agent = useAgent(agentId);
  const headingId = useId();
  return (
    <section className="section" aria-labelledby={headingId}>
      <h2 id={headingId}>Signed-in visitors and greeting</h2>
      {agent.isPending ? <Loading what="the agent" /> : agent.isError ? <ErrorAlert error={agent.error} /> : <WebChatSettings agent={agent.data} />}
    </section>
  );
}

function WebChatSettings({ agent }: { agent: Agent }) {
  const web = agent.spec.triggers?.web_chat;
  const update = useUpdateWebChat(agent);
  const announce = useAnnounce();
  const switchId = useId();
  const [greeting, setGreeting] = useState(web?.greeting ?? '');
  useEffect(() => setGreeting(web?.greeting ?? ''), [web?.greeting]);
  if (!web) {
    return (
      <p className="notice">
        The agent {agent.name} has no web-chat trigger: give it one (its allowed origins) before the widget can answer here.
      </p>
    );
  }
  // While the change is on its way the switch shows where it is going (then the agent as the API answers it).
  const asked = update.isPending ? update.variables?.require_identity_verification : undefined;
  const required = asked ?? web.require_identity_verification ?? false;
  return (
    <div className="stack">
      <p className="muted">These are the settings of the agent {agent.name}: every site of this agent uses them.</p>
      <div className="check">
        <input
          id={switchId}
          type="checkbox"
          role="switch"
          checked={required}
          disabled={update.isPending}
          aria-describedby={`${switchId}-hint`}
          onChange={(e) =>
            update.mutate(
              { require_identity_verification: e.target.checked },
              { onSuccess: () => announce(e.target.checked ? 'Identity verification is now required.' : 'Identity verification is no longer required.') },
            )
          }
        />
        <label htmlFor={switchId}>Require identity verification</label>
      </div>
      <p className="hint" id={`${switchId}-hint`}>
        On: a visitor who says who they are (data-user-id) must also bring the user_hash your server signs with the site secret; without it the widget is refused. Off: an unsigned id is taken as self-asserted.
      </p>
      <form
        className="stack"
        onSubmit={(event) => {
          event.preventDefault();
          const text = greeting.trim();
          update.mutate({ greeting: text || undefined }, { onSuccess: () => announce('Greeting saved.') });
        }}
      >
        <TextArea label="Greeting" rows={2} maxLength={500} value={greeting} onChange={(e) => setGreeting(e.target.value)} hint="The widget's first message to a visitor; empty: a short hello. A page's data-greeting overrides it." />
        <div className="row">
          <button type="submit" className="button primary" disabled={update.isPending}>
            Save greeting
          </button>
        </div>
      </form>
      <ErrorAlert error={update.error} />
    </div>
  );
}
