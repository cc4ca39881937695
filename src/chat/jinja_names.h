/* jinja_names.h: the interpreter's internal functions keep short names in the source (jv_, ju_, jinja_,
 * ...) but link as mf_chat_*, so the library exports only names prefixed by their module. */
#ifndef MF_JINJA_NAMES_H
#define MF_JINJA_NAMES_H

#define jarena_alloc mf_chat_jarena_alloc
#define jarena_fail mf_chat_jarena_fail
#define jarena_free mf_chat_jarena_free
#define jarena_strndup mf_chat_jarena_strndup
#define jbuf_printf mf_chat_jbuf_printf
#define jbuf_put mf_chat_jbuf_put
#define jbuf_putc mf_chat_jbuf_putc
#define jbuf_value mf_chat_jbuf_value
#define jinja_call_func mf_chat_jinja_call_func
#define jinja_call_method mf_chat_jinja_call_method
#define jinja_call_value mf_chat_jinja_call_value
#define jinja_error mf_chat_jinja_error
#define jinja_eval mf_chat_jinja_eval
#define jinja_exec mf_chat_jinja_exec
#define jinja_find_filter mf_chat_jinja_find_filter
#define jinja_find_func mf_chat_jinja_find_func
#define jinja_find_test mf_chat_jinja_find_test
#define jinja_format_percent mf_chat_jinja_format_percent
#define jinja_getattr mf_chat_jinja_getattr
#define jinja_getitem mf_chat_jinja_getitem
#define jinja_has_method mf_chat_jinja_has_method
#define jinja_iter_list mf_chat_jinja_iter_list
#define jinja_lex mf_chat_jinja_lex
#define jinja_parse mf_chat_jinja_parse
#define jinja_parse_fail mf_chat_jinja_parse_fail
#define jinja_step mf_chat_jinja_step
#define jinja_str_lower mf_chat_jinja_str_lower
#define jinja_str_replace mf_chat_jinja_str_replace
#define jinja_str_strip mf_chat_jinja_str_strip
#define jinja_str_upper mf_chat_jinja_str_upper
#define jscope_get mf_chat_jscope_get
#define jscope_new mf_chat_jscope_new
#define jscope_set mf_chat_jscope_set
#define ju_case mf_chat_ju_case
#define ju_case_changes mf_chat_ju_case_changes
#define ju_case_ignorable mf_chat_ju_case_ignorable
#define ju_decode mf_chat_ju_decode
#define ju_encode mf_chat_ju_encode
#define ju_isalpha mf_chat_ju_isalpha
#define ju_iscased mf_chat_ju_iscased
#define ju_isnumeric mf_chat_ju_isnumeric
#define ju_isspace mf_chat_ju_isspace
#define ju_len mf_chat_ju_len
#define ju_lower mf_chat_ju_lower
#define ju_offset mf_chat_ju_offset
#define ju_put_case mf_chat_ju_put_case
#define ju_sigma_is_final mf_chat_ju_sigma_is_final
#define ju_space_prefix mf_chat_ju_space_prefix
#define ju_space_suffix mf_chat_ju_space_suffix
#define ju_trim_partial mf_chat_ju_trim_partial
#define ju_upper mf_chat_ju_upper
#define jv_compare mf_chat_jv_compare
#define jv_dict_get mf_chat_jv_dict_get
#define jv_dict_get_str mf_chat_jv_dict_get_str
#define jv_dict_new mf_chat_jv_dict_new
#define jv_dict_set mf_chat_jv_dict_set
#define jv_equal mf_chat_jv_equal
#define jv_from_json mf_chat_jv_from_json
#define jv_list_new mf_chat_jv_list_new
#define jv_list_push mf_chat_jv_list_push
#define jv_to_str mf_chat_jv_to_str
#define jv_truthy mf_chat_jv_truthy
#define jv_type_name mf_chat_jv_type_name
#define jv_write_float mf_chat_jv_write_float
#define jv_write_json mf_chat_jv_write_json
#define jv_write_repr mf_chat_jv_write_repr
#define jv_write_str mf_chat_jv_write_str

#endif /* MF_JINJA_NAMES_H */
