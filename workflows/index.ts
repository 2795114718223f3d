// Every workflow type the worker registers. Deterministic code only: see eslint.config.mjs.
export { kbIndexWorkflow } from './kb-index';
export { purgeExpiredWorkflow, reconcileStrandedWorkflow } from './maintenance';
export { messageSendWorkflow } from './message-send';
export { webhookDeliveryWorkflow } from './webhook-delivery';
export { conversationWorkflow, uploadIndexTaskWorkflow } from './conversation';
export { msgappInboundWorkflow } from './msgapp-inbound';
export { widgetUploadWorkflow } from './widget-upload';
export { transcribeWorkflow } from './transcribe';
export { structuredExtractionWorkflow } from './structured-extraction';
export { voiceSessionWorkflow } from './voice';
export { callWorkflow } from './call';
