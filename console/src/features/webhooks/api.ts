import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, call, type Body, type RequestBody } from '../../lib/api';

export type Subscription = Body<'/api/v1/webhook-subscriptions', 'get'>['subscriptions'][number];
export type EventName = Subscription['events'][number];
export type Delivery = Body<'/api/v1/webhook-subscriptions/{id}/deliveries', 'get'>['deliveries'][number];
export type DeliveryStatus = Delivery['status'];
export type SubscriptionChange = RequestBody<'/api/v1/webhook-subscriptions/{id}', 'patch'>;

/** Every event a subscription may name, with what it says (a new event in the API is a missing key here: the build fails). */
export const EVENTS: Record<EventName, string> = {
  'message.inbound': 'a customer’s message arrived (msgapp)',
  'message.status': 'a sent message was delivered, read or failed',
};

const all = ['v1', 'webhooks'] as const;
const one = (id: string) => [...all, id] as const;

export function useSubscriptions() {
  return useQuery({ queryKey: all, queryFn: () => call(api.GET('/api/v1/webhook-subscriptions')) });
}

export function useSubscription(id: string) {
  return useQuery({ queryKey: one(id), queryFn: () => call(api.GET('/api/v1/webhook-subscriptions/{id}', { params: { path: { id } } })) });
}

/** One page of a subscription's deliveries, newest first. */
export function useDeliveries(id: string, status: DeliveryStatus | '', cursor: string | null) {
  return useQuery({
    queryKey: [...one(id), 'deliveries', { status, cursor }],
    queryFn: () =>
      call(api.GET('/api/v1/webhook-subscriptions/{id}/deliveries', { params: { path: { id }, query: { limit: 25, ...(status ? { status } : {}), ...(cursor ? { cursor } : {}) } } })),
    placeholderData: keepPreviousData,
  });
}

/** A delivery with its attempts (status, latency, the answer's first KB) and the payload as delivered. */
export function useDelivery(id: string, deliveryId: string) {
  return useQuery({
    queryKey: [...one(id), 'deliveries', deliveryId],
    queryFn: () => call(api.GET('/api/v1/webhook-subscriptions/{id}/deliveries/{delivery_id}', { params: { path: { id, delivery_id: deliveryId } } })),
  });
}

function useWebhookMutation<A, R>(fn: (args: A) => Promise<R>) {
  const client = useQueryClient();
  return useMutation({ mutationFn: fn, onSettled: () => client.invalidateQueries({ queryKey: all }) });
}

export const useCreateSubscription = () =>
  useWebhookMutation((body: RequestBody<'/api/v1/webhook-subscriptions', 'post'>) => call(api.POST('/api/v1/webhook-subscriptions', { body })));
export const useUpdateSubscription = (id: string) =>
  useWebhookMutation((body: SubscriptionChange) => call(api.PATCH('/api/v1/webhook-subscriptions/{id}', { params: { path: { id } }, body })));
export const useDeleteSubscription = (id: string) => useWebhookMutation(() => call(api.DELETE('/api/v1/webhook-subscriptions/{id}', { params: { path: { id } } })));
export const useTestSubscription = (id: string) => useWebhookMutation(() => call(api.POST('/api/v1/webhook-subscriptions/{id}/test', { params: { path: { id } } })));
export const useRetryDelivery = (id: string) =>
  useWebhookMutation((deliveryId: string) => call(api.POST('/api/v1/webhook-subscriptions/{id}/deliveries/{delivery_id}/retry', { params: { path: { id, delivery_id: deliveryId } } })));
export const useReplay = (id: string) =>
  useWebhookMutation((body: RequestBody<'/api/v1/webhook-subscriptions/{id}/replay', 'post'>) => call(api.POST('/api/v1/webhook-subscriptions/{id}/replay', { params: { path: { id } }, body })));
