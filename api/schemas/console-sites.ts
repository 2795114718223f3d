import { z } from 'zod';
import { COMMAND_NAME, MAX_SITE_COMMANDS } from '../../domain/chat/page-commands';
import { LANGUAGES, LAUNCHER_LABEL_MAX, POSITIONS, THEMES } from '../../domain/widget/appearance';
import { idParam, idString } from './common';

const Timestamp = z.string().meta({ format: 'date-time' });

/** The site's look and language (the widget's init and config answer it; the console shows and sets it); each field has its default when unset. */
export const SiteAppearance = z
  .object({
    brand_color: z.string().regex(/^#[0-9a-f]{6}$/).meta({ description: 'The brand colour, `#rrggbb`; default #243b6b' }),
    position: z.enum(POSITIONS).meta({ description: 'The corner of the launcher; default right' }),
    launcher_label: z.string().nullable().meta({ description: `The launcher's text: plain text, one line, at most ${LAUNCHER_LABEL_MAX} characters; null: none (the default)` }),
    theme: z.enum(THEMES).meta({ description: "light, dark, or auto (the visitor's colour scheme; the default)" }),
    language: z.enum(LANGUAGES).meta({ description: "The widget's language; auto (the default) follows the visitor's browser" }),
  })
  .meta({ id: 'WidgetAppearance' });

/**
 * An allowed origin as typed: trimmed, lower-cased and its trailing slashes dropped before it is checked
 * (`https://shop.example`; 400 invalid_request naming `origins` for anything else, such as a path).
 */
const Origin = z.string().min(1).max(300).meta({ example: 'https://shop.example' });
const Origins = z
  .array(Origin)
  .min(1)
  .max(50)
  .meta({ description: 'The browser origins the widget may be embedded on (scheme and host, with a port if any): a request from any other is 403 origin_not_allowed' });
const PageCommands = z
  .array(z.string().regex(COMMAND_NAME))
  .max(MAX_SITE_COMMANDS)
  .meta({ description: "The page commands (`ui:command`) the site's page handles, lower snake case; empty: the agent sends none", example: ['navigate', 'open_checkout'] });

export const SiteId = idParam('site');

export const ConsoleSite = z
  .object({
    id: z.string().meta({ example: 'site_0a1b2c3d4e5f60718293a4b5' }),
    agent: z.object({ id: z.string(), name: z.string().nullable().meta({ description: 'null: the agent was deleted' }) }),
    status: z.enum(['active', 'suspended']).meta({ description: 'suspended: every widget request is 403 site_suspended and open sockets close' }),
    allowed_origins: z.array(z.string()),
    page_commands: z.array(z.string()),
    appearance: SiteAppearance,
    previous_secret: z
      .object({ expires_at: Timestamp })
      .nullable()
      .meta({ description: 'After a rotation: the previous secret still verifies user_hash until expires_at; null when no previous secret does' }),
    snippet: z.string().meta({ description: 'The HTML to paste into the site\'s pages: the widget\'s script from this service, with the site id', example: '<script src="https://concierge.example.com/widget.js" data-site-id="site_0a1b2c3d4e5f60718293a4b5"></script>' }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'ConsoleSite', description: 'A web-chat site; its secret is never shown here (only when created or rotated, once)' });

export const ConsoleSiteList = z.object({ sites: z.array(ConsoleSite) }).meta({ id: 'ConsoleSiteList' });

export const CreateSiteBody = z.object({
  agent_id: idString('agt').meta({ description: 'The agent that answers on this site (one of this workspace; 404 not_found otherwise)' }),
  origins: Origins,
});

export const CreatedSite = ConsoleSite.extend({
  site_secret: z.string().meta({ description: "The site secret, shown this once: your server signs user_hash with it (HMAC-SHA256 of `<site_id>.<external_id>`). Keep it on your server, never in a page" }),
}).meta({ id: 'ConsoleCreatedSite' });

export const UpdateSiteBody = z.object({
  origins: Origins.optional(),
  page_commands: PageCommands.optional(),
  appearance: z
    .object({
      brand_color: z.string().regex(/^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$/).meta({ description: '`#rgb` or `#rrggbb`, stored as lower-case `#rrggbb`', example: '#0a7f5a' }),
      position: z.enum(POSITIONS),
      launcher_label: z.string().max(200).nullable().meta({ description: `One line of plain text, at most ${LAUNCHER_LABEL_MAX} characters once trimmed (400 invalid_request naming launcher_label otherwise); null or empty: none` }),
      theme: z.enum(THEMES),
      language: z.enum(LANGUAGES),
    })
    .partial()
    .optional()
    .meta({ description: 'The fields given change; the others keep their value' }),
});

export const RotateSiteSecretBody = z
  .object({
    grace_hours: z
      .number()
      .int()
      .min(0)
      .max(720)
      .optional()
      .meta({ description: 'How long the previous secret still verifies user_hash (default 24; 0: not at all)' }),
  })
  .meta({ description: '`{}` for the default grace period' });

export const RotatedSiteSecret = z
  .object({
    site_id: z.string(),
    site_secret: z.string().meta({ description: 'The new secret, shown this once' }),
    previous_expires_at: Timestamp.meta({ description: 'Until when the previous secret still verifies user_hash' }),
  })
  .meta({ id: 'ConsoleRotatedSiteSecret' });
