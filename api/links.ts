import type { FastifyRequest } from 'fastify';

/** The API's own base URL: `[api] public_endpoint`, or what the client used to reach us. */
export function baseUrl(req: FastifyRequest, publicEndpoint: string): string {
  if (publicEndpoint) return publicEndpoint.replace(/\/+$/, '');
  return `${req.protocol}://${req.headers.host ?? 'localhost'}`;
}

export interface Link {
  href: string;
  rel: string;
}

/** Ironic's self + bookmark pair. */
export function resourceLinks(base: string, collection: string, id: string, sub = ''): Link[] {
  const suffix = sub ? `/${sub}` : '';
  return [
    { href: `${base}/v1/${collection}/${id}${suffix}`, rel: 'self' },
    { href: `${base}/${collection}/${id}${suffix}`, rel: 'bookmark' },
  ];
}
