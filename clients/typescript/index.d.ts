// Types of the tickwork control client (docs/control/*.schema.json is the contract they follow).
import type { LambdaClient } from "@aws-sdk/client-lambda";

export type RefusalType =
  | "Malformed" | "UnknownOperation" | "InvalidField" | "InvalidSpec" | "UnknownZone"
  | "NoSuchTenant" | "NoSuchSchedule" | "Conflict" | "TooLarge" | "Throttled" | "Raced";

export interface RefusalDoc {
  type: RefusalType;
  message: string;
  field?: string;
  index?: number;
  retryable: boolean;
}

export class Refused extends Error {
  constructor(error: RefusalDoc);
  type: RefusalType;
  field?: string;
  index?: number;
  retryable: boolean;
  detail: string;
}
export class Malformed extends Refused {}
export class UnknownOperation extends Refused {}
export class InvalidField extends Refused {}
export class InvalidSpec extends Refused {}
export class UnknownZone extends Refused {}
export class NoSuchTenant extends Refused {}
export class NoSuchSchedule extends Refused {}
export class Conflict extends Refused {}
export class TooLarge extends Refused {}
export class Throttled extends Refused {}
export class Raced extends Refused {}
export const refusals: Record<RefusalType, typeof Refused>;
export function refusal(error: RefusalDoc): Refused;

export class StackError extends Error {
  constructor(kind: string, message: string);
  kind: string;
}

export type Change = "added" | "changed" | "unchanged" | "removed";

export interface NewTenant { id: string; zone: string; owed_from?: string }
export interface NewSchedule {
  tenant: string; name: string; spec: string; spread_min?: number; gap?: "shift" | "skip"; fold?: "first" | "last" | "both";
  /** Any JSON document up to 4,096 bytes, delivered in every fire's unit as `payload`. */
  payload?: unknown;
}
export interface Entry { index: number; id: string; name?: string; outcome: Change }
export interface BatchResult { entries: Entry[]; refused: RefusalDoc[] }
export interface Tenant { id: string; zone: string; status: string; owed_from?: string; position: string }
export interface TenantPage { tenants: Tenant[]; cursor?: string }
export interface Done { id: string; name?: string; outcome: Change; zone?: string; fires_at?: string }
export interface Schedule {
  tenant: string; name: string; spec: string; spread_min: number; gap: string; fold: string; paused: boolean; one_off: boolean;
  payload?: unknown;
}
export interface Fire { name: string; occurrence: string; instant: string; due: string }
export interface GrainPeriod { grain: string; period: string; ends_at: string }
export interface Explanation {
  tenant: Tenant;
  sweep: { paused: boolean; paused_reason?: string; zone_registered: boolean; zone_through?: string; zone_waiting: boolean };
  calendar: { through?: string; last: GrainPeriod[]; next: GrainPeriod[] };
  schedules: { schedule: Schedule; next: Fire[] }[];
  queue: {
    retrying: number; dead: number; recovered: number;
    troubles: {
      id: string; kind: string; state: "retrying" | "running" | "dead" | "recovered"; attempts: number; last_error: string;
      retry_at?: string; ended_at?: string;
    }[];
    last_recovered?: string; delivered_before: string; oldest_ready_age_s: number;
    shared_retrying: number; more: boolean;
  };
  findings: string[];
}

export class Control {
  constructor(functionName: string, client?: LambdaClient);
  functionName: string;
  call(request: { op: string; [field: string]: unknown }): Promise<unknown>;
  addTenants(tenants: NewTenant[]): Promise<BatchResult>;
  addTenant(id: string, zone: string, owedFrom?: string): Promise<Change>;
  getTenant(id: string): Promise<Tenant>;
  suspendTenant(id: string): Promise<Done>;
  resumeTenant(id: string): Promise<Done>;
  moveTenant(id: string, zone: string): Promise<Done>;
  removeTenant(id: string): Promise<Done>;
  listTenants(cursor?: string, limit?: number): Promise<TenantPage>;
  iterTenants(limit?: number): AsyncGenerator<Tenant>;
  explainTenant(id: string): Promise<Explanation>;
  putSchedules(schedules: NewSchedule[]): Promise<BatchResult>;
  putSchedule(tenant: string, name: string, spec: string,
    options?: { spreadMin?: number; gap?: "shift" | "skip"; fold?: "first" | "last" | "both"; payload?: unknown }): Promise<Change>;
  pauseSchedule(tenant: string, name: string): Promise<Done>;
  resumeSchedule(tenant: string, name: string): Promise<Done>;
  removeSchedule(tenant: string, name: string): Promise<Done>;
  listSchedules(tenant: string): Promise<Schedule[]>;
  nextFires(tenant: string, options?: { name?: string; count?: number; from?: string }): Promise<Fire[]>;
  setTimer(tenant: string, name: string, at: string, payload?: unknown): Promise<Done>;
  cancelTimer(tenant: string, name: string): Promise<Done>;
}
