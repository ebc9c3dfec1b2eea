/* libtightfit.so is the layers' static libraries linked whole (cmake/shared_library.cmake); a
 * library target needs one source of its own, and this is it. */
typedef int tf_shared_library_has_no_code_of_its_own;
