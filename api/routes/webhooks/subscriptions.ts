import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import type { Services } from '../../../app/services';
import { z } from 'zod';
import { auditOf, authOf } from '../../types';
import { authErrors, ErrorBody, idParam } from '../../schemas/common';
import {
  CreateSubscriptionBody,
  DeliveryDetail,
  DeliveryList,
  DeliveryParams,
  Delivery,
  ListAllDeliveriesQuery,
  ListDeliveriesQuery,
  ReplayBody,
  ReplayResult,
  RetryAllBody,
  RetryAllResult,
  SubscriptionList,
  SubscriptionUpdateResult,
  SubscriptionWithHealth,
  SubscriptionWithSecret,
  TestResult,
  UpdateSubscriptionBody,
} from '../../schemas/webhooks';

const WhkId = idParam('whk');

const tags = ['Webhooks'];
const notFound = ErrorBody.meta({ description: 'not_found' });

const date = (s: string | undefined) => (s === undefined ? undefined : new Date(s));

export const webhookRoutes: FastifyPluginAsyncZod<{ services: Pick<Services, 'subscriptions' | 'deliveries' | 'webhookRetryRuns'> }> = async (app, opts) => {
  const subs = opts.services.subscriptions;
  const deliveries = opts.services.deliveries;
  const retryRuns = opts.services.webhookRetryRuns;

  app.post('/api/v1/webhook-subscriptions', {
    config: { scope: 'webhooks:write' },
    schema: {
      operationId: 'createWebhookSubscription',
      summary: 'Create a webhook subscription (the secret is returned only here)',
      tags,
      body: CreateSubscriptionBody,
      response: { 201: SubscriptionWithSecret, ...authErrors, 400: ErrorBody.meta({ description: 'invalid_request or invalid_url (with `reason`)' }) },
    },
    handler: async (request, reply) => reply.code(201).send(await subs.create(authOf(request).workspaceId, request.body.url, request.body.events)),
  });

  app.get('/api/v1/webhook-subscriptions', {
    config: { scope: 'webhooks:read' },
    schema: { operationId: 'listWebhookSubscriptions', summary: 'List webhook subscriptions with their delivery health', tags, response: { 200: SubscriptionList, ...authErrors } },
    handler: async (request) => ({ subscriptions: await subs.list(authOf(request).workspaceId) }),
  });

  app.get('/api/v1/webhook-subscriptions/:id', {
    config: { scope: 'webhooks:read' },
    schema: {
      operationId: 'getWebhookSubscription',
      summary: 'A webhook subscription with its delivery health (failing since, retrying now, last error)',
      tags,
      params: WhkId,
      response: { 200: SubscriptionWithHealth, ...authErrors, 404: notFound },
    },
    handler: async (request) => subs.get(authOf(request).workspaceId, request.params.id),
  });

  app.patch('/api/v1/webhook-subscriptions/:id', {
    config: { scope: 'webhooks:write' },
    schema: {
      operationId: 'updateWebhookSubscription',
      summary: 'Update url, events or status, or rotate the secret',
      tags,
      params: WhkId,
      body: UpdateSubscriptionBody,
      response: { 200: SubscriptionUpdateResult, ...authErrors, 404: notFound },
    },
    handler: async (request) => subs.update(authOf(request).workspaceId, request.params.id, request.body, auditOf(request)),
  });

  app.delete('/api/v1/webhook-subscriptions/:id', {
    config: { scope: 'webhooks:write' },
    schema: {
      operationId: 'deleteWebhookSubscription',
      summary: 'Delete a subscription (pending deliveries stop; their retry runs are cancelled)',
      tags,
      params: WhkId,
      response: { 204: z.null().meta({ description: 'Deleted' }), ...authErrors, 404: notFound },
    },
    handler: async (request, reply) => {
      await retryRuns.deleteSubscription(authOf(request).workspaceId, request.params.id, request.log);
      return reply.code(204).send(null);
    },
  });

  app.post('/api/v1/webhook-subscriptions/:id/test', {
    config: { scope: 'webhooks:write' },
    schema: {
      operationId: 'testWebhookSubscription',
      summary: 'Send a signed webhook.test event now and report what the endpoint answered',
      tags,
      params: WhkId,
      response: { 200: TestResult, ...authErrors, 404: notFound },
    },
    handler: async (request) => subs.sendTest(authOf(request).workspaceId, request.params.id),
  });

  app.get('/api/v1/webhook-subscriptions/:id/deliveries', {
    config: { scope: 'webhooks:read' },
    schema: {
      operationId: 'listWebhookDeliveries',
      summary: 'List deliveries, newest first (keyset cursor: new deliveries never shift a page)',
      tags,
      params: WhkId,
      querystring: ListDeliveriesQuery,
      response: { 200: DeliveryList, ...authErrors, 404: notFound },
    },
    handler: async (request) => deliveries.list(authOf(request).workspaceId, request.params.id, request.query),
  });

  app.get('/api/v1/webhook-subscriptions/:id/deliveries/:delivery_id', {
    config: { scope: 'webhooks:read' },
    schema: {
      operationId: 'getWebhookDelivery',
      summary: 'A delivery with its attempt log and payload',
      tags,
      params: DeliveryParams,
      response: { 200: DeliveryDetail, ...authErrors, 404: notFound },
    },
    handler: async (request) => deliveries.get(authOf(request).workspaceId, request.params.id, request.params.delivery_id),
  });

  app.post('/api/v1/webhook-subscriptions/:id/deliveries/:delivery_id/retry', {
    config: { scope: 'webhooks:write' },
    schema: {
      operationId: 'retryWebhookDelivery',
      summary: 'Deliver again (same X-Concierge-Delivery, new run of up to 6 attempts)',
      tags,
      params: DeliveryParams,
      response: { 202: Delivery, ...authErrors, 404: notFound, 409: ErrorBody.meta({ description: 'delivery_in_progress' }) },
    },
    handler: async (request, reply) => reply.code(202).send(await deliveries.retry(authOf(request).workspaceId, request.params.id, request.params.delivery_id)),
  });

  app.post('/api/v1/webhook-subscriptions/:id/deliveries/:delivery_id/retry-now', {
    config: { scope: 'webhooks:write' },
    schema: {
      operationId: 'retryWebhookDeliveryNow',
      summary: 'Skip the backoff wait of a delivery in a retry run: its next attempt is made at once',
      tags,
      params: DeliveryParams,
      response: {
        202: Delivery,
        ...authErrors,
        404: notFound,
        409: ErrorBody.meta({ description: 'delivery_not_retrying: not pending in a retry run (delivered, failed, or its first attempt under way)' }),
        503: ErrorBody.meta({ description: 'workflow_unavailable' }),
      },
    },
    handler: async (request, reply) => reply.code(202).send(await retryRuns.retryNow(authOf(request).workspaceId, request.params.id, request.params.delivery_id)),
  });

  app.get('/api/v1/webhook-deliveries', {
    config: { scope: 'webhooks:read' },
    schema: {
      operationId: 'listWorkspaceWebhookDeliveries',
      summary: "The workspace's deliveries across subscriptions, failed ones by default, newest first (keyset cursor)",
      tags,
      querystring: ListAllDeliveriesQuery,
      response: { 200: DeliveryList, ...authErrors },
    },
    handler: async (request) => {
      const q = request.query;
      return deliveries.listAll(authOf(request).workspaceId, { ...q, since: date(q.since), until: date(q.until) });
    },
  });

  app.post('/api/v1/webhook-deliveries/retry', {
    config: { scope: 'webhooks:write' },
    schema: {
      operationId: 'retryWebhookDeliveries',
      summary: 'Retry all: deliver again the failed deliveries matching the filter (oldest first, 500 per call; a repeat moves nothing)',
      tags,
      body: RetryAllBody,
      response: { 202: RetryAllResult, ...authErrors },
    },
    handler: async (request, reply) => {
      const b = request.body;
      return reply.code(202).send(await deliveries.retryAll(authOf(request).workspaceId, { subscription_id: b.subscription_id, since: date(b.since), until: date(b.until) }));
    },
  });

  app.post('/api/v1/webhook-subscriptions/:id/replay', {
    config: { scope: 'webhooks:write' },
    schema: {
      operationId: 'replayWebhookDeliveries',
      summary: 'Deliver again every failed delivery created in [since, until)',
      tags,
      params: WhkId,
      body: ReplayBody,
      response: { 202: ReplayResult, ...authErrors, 404: notFound },
    },
    handler: async (request, reply) =>
      reply.code(202).send(await deliveries.replay(authOf(request).workspaceId, request.params.id, new Date(request.body.since), new Date(request.body.until))),
  });
};
