/**
 * A BIOS setting as Ironic caches it (objects/bios.py BIOSSetting): the value as a string,
 * with what the BMC's attribute registry says of it (API 1.74), null where it says nothing.
 */
export interface BiosSetting {
  name: string;
  value: string | null;
  attributeType: string | null;
  allowableValues: string[] | null;
  lowerBound: number | null;
  maxLength: number | null;
  minLength: number | null;
  readOnly: boolean | null;
  resetRequired: boolean | null;
  unique: boolean | null;
  upperBound: number | null;
}

/** The registry fields of a setting (Ironic's registry_fields), in Ironic's order. */
export const BIOS_REGISTRY_FIELDS = [
  'attribute_type', 'allowable_values', 'lower_bound', 'max_length', 'min_length', 'read_only', 'reset_required', 'unique', 'upper_bound',
] as const;
