// What receivers of Concierge webhooks import: `import { verifyWebhook } from 'concierge/sdk'`.
export { verifyWebhook, WebhookVerificationError } from '../core/webhooks/signature';
