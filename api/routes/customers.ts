import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import type { Services } from '../../app/services';
import { authOf } from '../types';
import { authErrors, ErrorBody, idParam } from '../schemas/common';
import { CreateCustomerBody, Customer, CustomerList, LinkBody, LinkResult, ListCustomersQuery, PatchCustomerBody } from '../schemas/customers';

const CusId = idParam('cus');

const tags = ['Customers'];
const conflict = ErrorBody.meta({ description: 'identity_in_use: the phone, email or external id belongs to another customer (`customer_id`)' });

export const customerRoutes: FastifyPluginAsyncZod<{ services: Pick<Services, 'customers'> }> = async (app, opts) => {
  const customers = opts.services.customers;

  app.get('/api/v1/customers', {
    config: { scope: 'customers:read' },
    schema: { operationId: 'listCustomers', summary: 'List customers, newest first; filter by an identity', tags, querystring: ListCustomersQuery, response: { 200: CustomerList, ...authErrors } },
    handler: async (request) => customers.list(authOf(request).workspaceId, request.query),
  });

  app.get('/api/v1/customers/:id', {
    config: { scope: 'customers:read' },
    schema: { operationId: 'getCustomer', summary: 'Get a customer', tags, params: CusId, response: { 200: Customer, ...authErrors, 404: ErrorBody } },
    handler: async (request) => customers.get(authOf(request).workspaceId, request.params.id),
  });

  app.post('/api/v1/customers', {
    config: { scope: 'customers:write' },
    schema: { operationId: 'createCustomer', summary: 'Create a customer', tags, body: CreateCustomerBody, response: { 201: Customer, ...authErrors, 409: conflict } },
    handler: async (request, reply) => reply.code(201).send(await customers.create(authOf(request).workspaceId, request.body)),
  });

  app.patch('/api/v1/customers/:id', {
    config: { scope: 'customers:write' },
    schema: { operationId: 'updateCustomer', summary: 'Update a customer', tags, params: CusId, body: PatchCustomerBody, response: { 200: Customer, ...authErrors, 404: ErrorBody, 409: conflict } },
    handler: async (request) => customers.update(authOf(request).workspaceId, request.params.id, request.body),
  });

  app.post('/api/v1/customer/link', {
    config: { scope: 'customers:write' },
    schema: {
      operationId: 'linkCustomerIdentity',
      summary: 'Attach identities to a customer, merging the customers that held them',
      tags,
      body: LinkBody,
      response: { 200: LinkResult, ...authErrors, 404: ErrorBody },
    },
    handler: async (request) => customers.link(authOf(request).workspaceId, request.body),
  });
};
