import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import type { Services } from '../../../core/services';
import { z } from 'zod';
import { authOf } from '../../types';
import { authErrors, ErrorBody, idParam } from '../../schemas/common';
import {
  CreateSubscriptionBody,
  DeliveryDetail,
  DeliveryList,
  DeliveryParams,
  Delivery,
  ListDeliveriesQuery,
  ReplayBody,
  ReplayResult,
  SubscriptionList,
  SubscriptionUpdateResult,
  SubscriptionWithSecret,
  TestResult,
  UpdateSubscriptionBody,
} from '../../schemas/webhooks';

const WhkId = idParam('whk');

const tags = ['Webhooks'];
const notFound = ErrorBody.meta({ description: 'not_found' });

export const webhookRoutes: FastifyPluginAsyncZod<{ services: Pick<Services, 'subscriptions' | 'deliveries'> }> = async (app, opts) => {
  const subs = opts.services.subscriptions;
  const deliveries = opts.services.deliveries;

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
    handler: async (request) => subs.update(authOf(request).workspaceId, request.params.id, request.body),
  });

  app.delete('/api/v1/webhook-subscriptions/:id', {
    config: { scope: 'webhooks:write' },
    schema: {
      operationId: 'deleteWebhookSubscription',
      summary: 'Delete a subscription (pending deliveries stop)',
      tags,
      params: WhkId,
      response: { 204: z.null().meta({ description: 'Deleted' }), ...authErrors, 404: notFound },
    },
    handler: async (request, reply) => {
      await subs.delete(authOf(request).workspaceId, request.params.id);
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
